package sqlsim

import (
	"encoding/hex"
	"strconv"
	"strings"
)

func (p *parser) selectStmt() (*selectStmt, error) {
	if err := p.expect("SELECT"); err != nil {
		return nil, err
	}
	s := &selectStmt{}
	if p.accept("TOP") {
		paren := p.acceptOp("(")
		e, err := p.primary()
		if err != nil {
			return nil, err
		}
		if paren {
			if err := p.expectOp(")"); err != nil {
				return nil, err
			}
		}
		s.top = e
	}
	for {
		if p.acceptOp("*") {
			s.items = append(s.items, selItem{star: true})
		} else if t := p.peek(); (t.kind == tIdent || t.kind == tQIdent) && !isKeyword(t) && p.peekAt(1).isOp(".") && p.peekAt(2).isOp("*") {
			p.next()
			p.next()
			p.next()
			s.items = append(s.items, selItem{star: true, starQual: t.text})
		} else {
			// alias = expr
			if (p.peek().kind == tIdent || p.peek().kind == tQIdent) && p.peekAt(1).isOp("=") && !isKeyword(p.peek()) {
				alias := p.next().text
				p.next()
				e, err := p.expr()
				if err != nil {
					return nil, err
				}
				s.items = append(s.items, selItem{e: e, alias: alias})
			} else {
				e, err := p.expr()
				if err != nil {
					return nil, err
				}
				it := selItem{e: e}
				if p.accept("AS") {
					t := p.next()
					if t.kind != tIdent && t.kind != tQIdent && t.kind != tString {
						return nil, errNear(t)
					}
					it.alias = t.text
				} else if t := p.peek(); (t.kind == tQIdent) || (t.kind == tIdent && !isKeyword(t)) {
					it.alias = p.next().text
				}
				s.items = append(s.items, it)
			}
		}
		if !p.acceptOp(",") {
			break
		}
	}
	if p.accept("FROM") {
		name, err := p.objName()
		if err != nil {
			return nil, err
		}
		f := &fromClause{name: name}
		if p.peek().isOp("(") {
			if !tableFunctions[strings.ToLower(name.last())] {
				return nil, errNotSupported("table-valued function " + name.String())
			}
			if f.args, err = p.args(); err != nil {
				return nil, err
			}
		}
		f.alias = p.optAlias()
		if p.peek().is("CROSS") && p.peekAt(1).is("APPLY") {
			p.next()
			p.next()
			fn, err := p.objName()
			if err != nil {
				return nil, err
			}
			want, ok := applyFunctions[strings.ToLower(fn.last())]
			if !ok {
				return nil, errNotSupported("CROSS APPLY " + fn.String())
			}
			if f.applyArgs, err = p.args(); err != nil {
				return nil, err
			}
			if len(f.applyArgs) != want {
				return nil, sqlErr(216, 16, "Parameters were not supplied for the function '%s'.", fn.String())
			}
			f.apply, f.applyFn = true, strings.ToLower(fn.last())
			f.applyAlias = p.optAlias()
		}
		if err := p.joins(f); err != nil {
			return nil, err
		}
		s.from = f
	}
	if p.accept("WHERE") {
		e, err := p.expr()
		if err != nil {
			return nil, err
		}
		s.where = e
	}
	if p.peek().is("GROUP") || p.peek().is("HAVING") {
		return nil, errNotSupported("GROUP BY")
	}
	if p.accept("ORDER") {
		if err := p.expect("BY"); err != nil {
			return nil, err
		}
		for {
			e, err := p.expr()
			if err != nil {
				return nil, err
			}
			o := orderItem{e: e}
			if p.accept("DESC") {
				o.desc = true
			} else {
				p.accept("ASC")
			}
			s.order = append(s.order, o)
			if !p.acceptOp(",") {
				break
			}
		}
	}
	if p.peek().is("UNION") || p.peek().is("OPTION") || p.peek().is("FOR") {
		return nil, errNotSupported(strings.ToUpper(p.peek().text))
	}
	return s, nil
}

// tableFunctions are the table-valued functions a FROM clause may start
// with; applyFunctions those CROSS APPLY takes, with their argument count.
var (
	tableFunctions = map[string]bool{"dm_os_file_exists": true}
	applyFunctions = map[string]int{"dm_exec_sql_text": 1, "dm_os_volume_stats": 2}
)

// args reads a parenthesised, comma-separated list of one or more
// expressions: a function's arguments, a VALUES row.
func (p *parser) args() ([]expr, error) {
	if err := p.expectOp("("); err != nil {
		return nil, err
	}
	var out []expr
	for {
		e, err := p.expr()
		if err != nil {
			return nil, err
		}
		out = append(out, e)
		if !p.acceptOp(",") {
			break
		}
	}
	return out, p.expectOp(")")
}

// joins reads the JOIN clauses after the first table source: inner, left
// outer and cross joins of named tables; RIGHT/FULL joins, comma joins and
// derived tables are valid T-SQL the emulator does not implement.
func (p *parser) joins(f *fromClause) error {
	for {
		t := p.peek()
		var kind string
		switch {
		case t.is("JOIN"):
			p.next()
			kind = "INNER"
		case t.is("INNER") && p.peekAt(1).is("JOIN"):
			p.next()
			p.next()
			kind = "INNER"
		case t.is("LEFT") && p.peekAt(1).is("JOIN"):
			p.next()
			p.next()
			kind = "LEFT"
		case t.is("LEFT") && p.peekAt(1).is("OUTER") && p.peekAt(2).is("JOIN"):
			p.next()
			p.next()
			p.next()
			kind = "LEFT"
		case t.is("CROSS") && p.peekAt(1).is("JOIN"):
			p.next()
			p.next()
			kind = "CROSS"
		case t.is("RIGHT") || t.is("FULL") || t.is("OUTER") || t.isOp(","):
			return errNotSupported("RIGHT, FULL and comma joins")
		case t.is("INNER") || t.is("LEFT") || t.is("CROSS"):
			return errNear(p.peekAt(1))
		default:
			return nil
		}
		if p.peek().isOp("(") {
			return errNotSupported("joins of derived tables")
		}
		name, err := p.objName()
		if err != nil {
			return err
		}
		j := joinClause{kind: kind, name: name, alias: p.optAlias()}
		if kind != "CROSS" {
			if err := p.expect("ON"); err != nil {
				return err
			}
			if j.on, err = p.expr(); err != nil {
				return err
			}
		}
		f.joins = append(f.joins, j)
	}
}

// waitforStmt reads WAITFOR DELAY|TIME <string or @variable>; the Service
// Broker forms (RECEIVE, GET CONVERSATION GROUP) are not emulated.
func (p *parser) waitforStmt() (stmt, error) {
	p.next()
	s := &waitforStmt{}
	switch {
	case p.accept("DELAY"):
		s.delay = true
	case p.accept("TIME"):
	case p.peek().isOp("("):
		return nil, errNotSupported("WAITFOR (RECEIVE ...)")
	default:
		return nil, errNear(p.peek())
	}
	t := p.peek()
	if t.kind != tString && t.kind != tVar {
		return nil, errNear(t)
	}
	e, err := p.primary()
	if err != nil {
		return nil, err
	}
	s.e = e
	return s, nil
}

func (p *parser) optAlias() string {
	if p.accept("AS") {
		if id, err := p.ident(); err == nil {
			return id
		}
		return ""
	}
	if t := p.peek(); t.kind == tQIdent || (t.kind == tIdent && !isKeyword(t)) {
		p.next()
		return t.text
	}
	return ""
}

var keywords = map[string]bool{
	"FROM": true, "WHERE": true, "ORDER": true, "GROUP": true, "HAVING": true, "AS": true, "AND": true, "OR": true,
	"NOT": true, "IS": true, "IN": true, "LIKE": true, "CROSS": true, "JOIN": true, "INNER": true, "LEFT": true,
	"RIGHT": true, "OUTER": true, "FULL": true, "ON": true, "UNION": true, "SELECT": true, "SET": true, "OUTPUT": true, "VALUES": true,
	"BEGIN": true, "END": true, "ELSE": true, "IF": true, "INSERT": true, "UPDATE": true, "DELETE": true, "EXEC": true,
	"EXECUTE": true, "CREATE": true, "ALTER": true, "DROP": true, "BACKUP": true, "RESTORE": true, "DBCC": true,
	"USE": true, "DECLARE": true, "WITH": true, "OPTION": true, "FOR": true, "PRINT": true, "APPLY": true,
	"NULL": true, "ASC": true, "DESC": true, "BY": true, "TO": true, "INTO": true, "EXISTS": true, "TOP": true,
}

func isKeyword(t token) bool { return t.kind == tIdent && keywords[strings.ToUpper(t.text)] }

// Expressions, lowest precedence first.

func (p *parser) expr() (expr, error) { return p.orExpr() }

func (p *parser) orExpr() (expr, error) {
	l, err := p.andExpr()
	if err != nil {
		return nil, err
	}
	for p.accept("OR") {
		r, err := p.andExpr()
		if err != nil {
			return nil, err
		}
		l = &binExpr{op: "OR", l: l, r: r}
	}
	return l, nil
}

func (p *parser) andExpr() (expr, error) {
	l, err := p.notExpr()
	if err != nil {
		return nil, err
	}
	for p.accept("AND") {
		r, err := p.notExpr()
		if err != nil {
			return nil, err
		}
		l = &binExpr{op: "AND", l: l, r: r}
	}
	return l, nil
}

func (p *parser) notExpr() (expr, error) {
	if p.accept("NOT") {
		e, err := p.notExpr()
		if err != nil {
			return nil, err
		}
		if ex, ok := e.(*existsExpr); ok {
			ex.not = !ex.not
			return ex, nil
		}
		return &unaryExpr{op: "NOT", e: e}, nil
	}
	return p.cmpExpr()
}

func (p *parser) cmpExpr() (expr, error) {
	l, err := p.addExpr()
	if err != nil {
		return nil, err
	}
	t := p.peek()
	switch {
	case t.kind == tOp && (t.text == "=" || t.text == "<>" || t.text == "!=" || t.text == "<" || t.text == ">" || t.text == "<=" || t.text == ">="):
		p.next()
		r, err := p.addExpr()
		if err != nil {
			return nil, err
		}
		op := t.text
		if op == "!=" {
			op = "<>"
		}
		return &binExpr{op: op, l: l, r: r}, nil
	case t.is("IS"):
		p.next()
		not := p.accept("NOT")
		if err := p.expect("NULL"); err != nil {
			return nil, err
		}
		return &isNullExpr{e: l, not: not}, nil
	case t.is("NOT") && (p.peekAt(1).is("IN") || p.peekAt(1).is("LIKE")):
		p.next()
		e, err := p.inOrLike(l)
		if err != nil {
			return nil, err
		}
		switch x := e.(type) {
		case *inExpr:
			x.not = true
		case *likeExpr:
			x.not = true
		}
		return e, nil
	case t.is("IN") || t.is("LIKE"):
		return p.inOrLike(l)
	}
	return l, nil
}

func (p *parser) inOrLike(l expr) (expr, error) {
	if p.accept("LIKE") {
		r, err := p.addExpr()
		if err != nil {
			return nil, err
		}
		return &likeExpr{e: l, pattern: r}, nil
	}
	p.next() // IN
	if err := p.expectOp("("); err != nil {
		return nil, err
	}
	if p.peek().is("SELECT") {
		return nil, errNotSupported("IN (subquery)")
	}
	in := &inExpr{e: l}
	for {
		e, err := p.expr()
		if err != nil {
			return nil, err
		}
		in.list = append(in.list, e)
		if !p.acceptOp(",") {
			break
		}
	}
	return in, p.expectOp(")")
}

func (p *parser) addExpr() (expr, error) {
	l, err := p.mulExpr()
	if err != nil {
		return nil, err
	}
	for p.peek().isOp("+") || p.peek().isOp("-") {
		op := p.next().text
		r, err := p.mulExpr()
		if err != nil {
			return nil, err
		}
		l = &binExpr{op: op, l: l, r: r}
	}
	return l, nil
}

func (p *parser) mulExpr() (expr, error) {
	l, err := p.unary()
	if err != nil {
		return nil, err
	}
	for p.peek().isOp("*") || p.peek().isOp("/") || p.peek().isOp("%") {
		op := p.next().text
		r, err := p.unary()
		if err != nil {
			return nil, err
		}
		l = &binExpr{op: op, l: l, r: r}
	}
	return l, nil
}

func (p *parser) unary() (expr, error) {
	if p.peek().isOp("-") || p.peek().isOp("+") {
		op := p.next().text
		e, err := p.unary()
		if err != nil {
			return nil, err
		}
		if op == "+" {
			return e, nil
		}
		return &unaryExpr{op: "-", e: e}, nil
	}
	return p.primary()
}

func (p *parser) primary() (expr, error) {
	t := p.peek()
	switch t.kind {
	case tString:
		p.next()
		return &litExpr{v: t.text}, nil
	case tBinary:
		p.next()
		h := t.text
		if len(h)%2 == 1 {
			h = "0" + h // 0x1 is 0x01
		}
		b, err := hex.DecodeString(h)
		if err != nil {
			return nil, errNear(t)
		}
		return &litExpr{v: b}, nil
	case tNumber:
		p.next()
		if strings.Contains(t.text, ".") {
			f, err := strconv.ParseFloat(t.text, 64)
			if err != nil {
				return nil, errNear(t)
			}
			return &litExpr{v: f}, nil
		}
		n, err := strconv.ParseInt(t.text, 10, 64)
		if err != nil {
			f, _ := strconv.ParseFloat(t.text, 64)
			return &litExpr{v: f}, nil
		}
		return &litExpr{v: n}, nil
	case tVar:
		p.next()
		return &varExpr{name: t.text}, nil
	case tSysVar:
		p.next()
		return &sysVarExpr{name: strings.ToUpper(t.text)}, nil
	case tOp:
		if t.text == "(" {
			p.next()
			if p.peek().is("SELECT") {
				q, err := p.selectStmt()
				if err != nil {
					return nil, err
				}
				return &subqueryExpr{q: q}, p.expectOp(")")
			}
			e, err := p.expr()
			if err != nil {
				return nil, err
			}
			return e, p.expectOp(")")
		}
		return nil, errNear(t)
	case tIdent, tQIdent:
		if t.kind == tIdent {
			switch strings.ToUpper(t.text) {
			case "NULL":
				p.next()
				return &litExpr{v: nil}, nil
			case "EXISTS":
				p.next()
				if err := p.expectOp("("); err != nil {
					return nil, err
				}
				q, err := p.selectStmt()
				if err != nil {
					return nil, err
				}
				return &existsExpr{q: q}, p.expectOp(")")
			case "CAST":
				if p.peekAt(1).isOp("(") {
					p.next()
					p.next()
					e, err := p.expr()
					if err != nil {
						return nil, err
					}
					if err := p.expect("AS"); err != nil {
						return nil, err
					}
					typ, err := p.typeName()
					if err != nil {
						return nil, err
					}
					return &castExpr{e: e, typ: typ}, p.expectOp(")")
				}
			case "CASE":
				return nil, errNotSupported("CASE")
			}
			if isKeyword(t) {
				return nil, errNear(t)
			}
		}
		name, err := p.objName()
		if err != nil {
			return nil, err
		}
		if p.peek().isOp("(") {
			p.next()
			f := &funcExpr{name: strings.ToUpper(name.String())}
			if len(name.parts) > 1 {
				f.parts = name.parts
			}
			if p.acceptOp("*") {
				f.star = true
			} else if !p.peek().isOp(")") {
				p.accept("DISTINCT")
				for {
					e, err := p.expr()
					if err != nil {
						return nil, err
					}
					f.args = append(f.args, e)
					if !p.acceptOp(",") {
						break
					}
				}
			}
			if err := p.expectOp(")"); err != nil {
				return nil, err
			}
			if p.peek().is("OVER") {
				return nil, errNotSupported("OVER")
			}
			return f, nil
		}
		return &colExpr{parts: name.parts}, nil
	}
	return nil, errNear(t)
}

// typeName reads a type such as int, bigint, nvarchar(128), nvarchar(max),
// decimal(10,2); it returns the base name in lower case.
func (p *parser) typeName() (string, error) {
	t, err := p.typeSpec()
	return t.name, err
}

// typeSpec is a data type as written: its lower-case name and the
// arguments in its parentheses ("max", "10", "2"), if any.
type typeSpec struct {
	name string
	args []string
}

func (p *parser) typeSpec() (typeSpec, error) {
	name, err := p.ident()
	if err != nil {
		return typeSpec{}, err
	}
	t := typeSpec{name: strings.ToLower(name)}
	if p.acceptOp("(") {
		for !p.peek().isOp(")") {
			if p.peek().kind == tEOF {
				return typeSpec{}, errNear(p.peek())
			}
			if a := p.next(); !a.isOp(",") {
				t.args = append(t.args, strings.ToLower(a.text))
			}
		}
		p.next()
	}
	return t, nil
}
