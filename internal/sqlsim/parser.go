package sqlsim

import (
	"strconv"
	"strings"
)

// A small recursive-descent parser for the T-SQL subset of the product (see
// doc.go for the exact list). Statements become the structs below; names
// are unescaped; @variables and RPC parameters stay variable references
// and are resolved when the statement runs, so values are never pasted
// into SQL text.

type stmt interface{}

type expr interface{}

type (
	litExpr    struct{ v any } // int64, float64, string or nil
	varExpr    struct{ name string }
	sysVarExpr struct{ name string }
	colExpr    struct{ parts []string }
	funcExpr   struct {
		name string
		args []expr
		star bool
	}
	binExpr struct {
		op   string
		l, r expr
	}
	unaryExpr struct {
		op string
		e  expr
	}
	isNullExpr struct {
		e   expr
		not bool
	}
	inExpr struct {
		e    expr
		list []expr
		not  bool
	}
	likeExpr struct {
		e, pattern expr
		not        bool
	}
	existsExpr struct {
		q   *selectStmt
		not bool
	}
	subqueryExpr struct{ q *selectStmt }
	castExpr     struct {
		e   expr
		typ string
	}
)

type selItem struct {
	star     bool
	starQual string // t.* : the table or alias, "" for *
	e        expr
	alias    string
}

type orderItem struct {
	e    expr
	desc bool
}

type objName struct{ parts []string } // 1-4 parts, last is the object

func (o objName) String() string { return strings.Join(o.parts, ".") }

func (o objName) last() string { return o.parts[len(o.parts)-1] }

type fromClause struct {
	name  objName
	alias string
	// CROSS APPLY sys.dm_exec_sql_text(arg) alias
	apply      bool
	applyArg   expr
	applyAlias string
	// joins follow the first table source, evaluated left to right.
	joins []joinClause
}

// joinClause is `[INNER] JOIN t [alias] ON cond`, `LEFT [OUTER] JOIN ...`
// or `CROSS JOIN t [alias]` (on is nil).
type joinClause struct {
	kind  string // "INNER", "LEFT" or "CROSS"
	name  objName
	alias string
	on    expr
}

type selectStmt struct {
	top   expr
	items []selItem
	from  *fromClause
	where expr
	order []orderItem
}

type ifStmt struct {
	cond      expr
	then, els stmt
}

type blockStmt struct{ list []stmt }

type execStmt struct {
	db  string // [db].sys.sp_executesql: the database the text runs in
	sql expr
}

type useStmt struct{ db expr }

type createSchemaStmt struct{ name string }

type createTableStmt struct {
	name   objName
	cols   []columnDef
	pk     *keyDef
	checks []checkDef
}

type alterTableStmt struct {
	name  objName
	check *checkDef // WITH CHECK ADD CONSTRAINT x CHECK (...); nil for CHECK CONSTRAINT x
}

type insertStmt struct {
	name objName
	cols []string
	rows [][]expr
}

type setItem struct {
	variable string // @v = ...
	column   string // col = ...
	e        expr
}

type updateStmt struct {
	name   objName
	sets   []setItem
	output []selItem
	where  expr
}

type declareStmt struct {
	names []string
	inits []expr
}

type setVarStmt struct {
	name string
	e    expr
}

// setOptionStmt is SET <option> ...; only LANGUAGE has an effect (value).
type setOptionStmt struct {
	option string
	value  expr
}

type backupStmt struct {
	db    expr
	disks []expr
	opts  map[string]expr // upper-case option -> value (nil for flags)
	order []string        // the options as given, repeats included
}

type moveOpt struct{ logical, to expr }

type restoreStmt struct {
	kind  string // DATABASE, FILELISTONLY, HEADERONLY, VERIFYONLY, LABELONLY
	db    expr
	disks []expr
	moves []moveOpt
	opts  map[string]expr
	order []string
}

type dbccStmt struct {
	db   expr // nil: current database
	opts []string
}

type dropDBStmt struct {
	ifExists bool
	names    []expr
}

type alterDBStmt struct {
	db       expr
	option   string
	rollback bool // WITH ROLLBACK IMMEDIATE | AFTER n
}

type printStmt struct{ e expr }

// killStmt is KILL session_id.
type killStmt struct{ spid expr }

// waitforStmt is WAITFOR DELAY 'hh:mm[:ss[.fff]]' or WAITFOR TIME '...'.
type waitforStmt struct {
	delay bool // DELAY (a period) or TIME (a time of day)
	e     expr
}

type parser struct {
	toks []token
	i    int
	sql  string
}

func parse(sql string) ([]stmt, error) {
	toks, err := lex(sql)
	if err != nil {
		return nil, err
	}
	p := &parser{toks: toks, sql: sql}
	var out []stmt
	for {
		for p.peek().isOp(";") {
			p.next()
		}
		if p.peek().kind == tEOF {
			return out, nil
		}
		s, err := p.statement()
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
}

func (p *parser) peek() token        { return p.toks[p.i] }
func (p *parser) peekAt(n int) token { return p.toks[min(p.i+n, len(p.toks)-1)] }
func (p *parser) next() token {
	t := p.toks[p.i]
	if p.i < len(p.toks)-1 {
		p.i++
	}
	return t
}

func (p *parser) accept(kw string) bool {
	if p.peek().is(kw) {
		p.next()
		return true
	}
	return false
}

func (p *parser) acceptOp(op string) bool {
	if p.peek().isOp(op) {
		p.next()
		return true
	}
	return false
}

func (p *parser) expect(kw string) error {
	if !p.accept(kw) {
		return errNear(p.peek())
	}
	return nil
}

func (p *parser) expectOp(op string) error {
	if !p.acceptOp(op) {
		return errNear(p.peek())
	}
	return nil
}

// ident reads one identifier (plain or delimited).
func (p *parser) ident() (string, error) {
	t := p.peek()
	if t.kind == tIdent || t.kind == tQIdent {
		p.next()
		return t.text, nil
	}
	return "", errNear(t)
}

// objName reads a dotted name of 1-4 parts ([db].[schema].[table], db..t).
func (p *parser) objName() (objName, error) {
	var parts []string
	for {
		if p.peek().isOp(".") && len(parts) > 0 { // db..table: default schema
			p.next()
			parts = append(parts, "")
			continue
		}
		id, err := p.ident()
		if err != nil {
			return objName{}, err
		}
		parts = append(parts, id)
		if !p.peek().isOp(".") || len(parts) == 4 {
			break
		}
		p.next()
	}
	return objName{parts: parts}, nil
}

var notSupportedStarts = map[string]bool{
	"DELETE": true, "MERGE": true, "TRUNCATE": true, "GRANT": true, "REVOKE": true, "DENY": true,
	"WHILE": true, "RETURN": true, "RAISERROR": true, "THROW": true,
	"CHECKPOINT": true, "RECONFIGURE": true, "SHUTDOWN": true, "WITH": true, "OPEN": true, "FETCH": true,
	"CLOSE": true, "DEALLOCATE": true, "COMMIT": true, "ROLLBACK": true, "SAVE": true, "GOTO": true,
	"BULK": true, "READTEXT": true, "WRITETEXT": true, "UPDATETEXT": true, "ENABLE": true, "DISABLE": true,
}

func (p *parser) statement() (stmt, error) {
	t := p.peek()
	if t.kind != tIdent {
		if t.isOp("(") { // (SELECT ...)
			return nil, errNotSupported("a parenthesised query")
		}
		return nil, errNear(t)
	}
	kw := strings.ToUpper(t.text)
	switch kw {
	case "SELECT":
		return p.selectStmt()
	case "IF":
		return p.ifStmt()
	case "BEGIN":
		if p.peekAt(1).is("TRAN") || p.peekAt(1).is("TRANSACTION") || p.peekAt(1).is("TRY") {
			return nil, errNotSupported("BEGIN " + strings.ToUpper(p.peekAt(1).text))
		}
		p.next()
		var list []stmt
		for {
			for p.acceptOp(";") {
			}
			if p.accept("END") {
				return &blockStmt{list: list}, nil
			}
			if p.peek().kind == tEOF {
				return nil, errNear(p.peek())
			}
			s, err := p.statement()
			if err != nil {
				return nil, err
			}
			list = append(list, s)
		}
	case "EXEC", "EXECUTE":
		return p.execStmt()
	case "USE":
		p.next()
		e, err := p.nameOrExpr()
		if err != nil {
			return nil, err
		}
		return &useStmt{db: e}, nil
	case "CREATE":
		return p.createStmt()
	case "ALTER":
		return p.alterStmt()
	case "INSERT":
		return p.insertStmt()
	case "UPDATE":
		return p.updateStmt()
	case "DECLARE":
		return p.declareStmt()
	case "SET":
		return p.setStmt()
	case "BACKUP":
		return p.backupStmt()
	case "RESTORE":
		return p.restoreStmt()
	case "DBCC":
		return p.dbccStmt()
	case "DROP":
		return p.dropStmt()
	case "PRINT":
		p.next()
		e, err := p.expr()
		if err != nil {
			return nil, err
		}
		return &printStmt{e: e}, nil
	case "WAITFOR":
		return p.waitforStmt()
	case "KILL":
		p.next()
		t := p.peek()
		if t.kind != tNumber && t.kind != tVar {
			return nil, errNotSupported("KILL of a unit of work or KILL STATS")
		}
		e, err := p.primary()
		if err != nil {
			return nil, err
		}
		if p.peek().is("WITH") {
			return nil, errNotSupported("KILL WITH STATUSONLY")
		}
		return &killStmt{spid: e}, nil
	}
	if notSupportedStarts[kw] {
		return nil, errNotSupported(kw)
	}
	// An unknown word is taken as a procedure name, as SQL Server does.
	if n := p.peekAt(1); n.kind == tEOF || n.isOp(";") {
		return nil, sqlErr(2812, 16, "Could not find stored procedure '%s'.", t.text)
	}
	p.next()
	return nil, errNear(p.peek())
}

func (p *parser) ifStmt() (stmt, error) {
	p.next()
	cond, err := p.expr()
	if err != nil {
		return nil, err
	}
	then, err := p.statement()
	if err != nil {
		return nil, err
	}
	s := &ifStmt{cond: cond, then: then}
	save := p.i
	for p.acceptOp(";") {
	}
	if p.accept("ELSE") {
		if s.els, err = p.statement(); err != nil {
			return nil, err
		}
	} else {
		p.i = save
	}
	return s, nil
}

func (p *parser) execStmt() (stmt, error) {
	p.next()
	name, err := p.objName()
	if err != nil {
		return nil, err
	}
	n := len(name.parts)
	if !strings.EqualFold(name.last(), "sp_executesql") || (n >= 2 && !strings.EqualFold(name.parts[n-2], "sys")) {
		return nil, errNotSupported("EXEC " + name.String())
	}
	s := &execStmt{}
	if n == 3 {
		s.db = name.parts[0]
	}
	if s.sql, err = p.expr(); err != nil {
		return nil, err
	}
	if p.peek().isOp(",") {
		return nil, errNotSupported("EXEC sp_executesql with parameters")
	}
	return s, nil
}

// nameOrExpr reads a database name given as an identifier, a string
// literal or a @variable.
func (p *parser) nameOrExpr() (expr, error) {
	t := p.peek()
	switch t.kind {
	case tIdent, tQIdent:
		p.next()
		return &litExpr{v: t.text}, nil
	case tString, tVar:
		return p.primary()
	}
	return nil, errNear(t)
}

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
		f.alias = p.optAlias()
		if p.peek().is("CROSS") && p.peekAt(1).is("APPLY") {
			p.next()
			p.next()
			fn, err := p.objName()
			if err != nil {
				return nil, err
			}
			if !strings.EqualFold(fn.last(), "dm_exec_sql_text") {
				return nil, errNotSupported("CROSS APPLY " + fn.String())
			}
			if err := p.expectOp("("); err != nil {
				return nil, err
			}
			if f.applyArg, err = p.expr(); err != nil {
				return nil, err
			}
			if err := p.expectOp(")"); err != nil {
				return nil, err
			}
			f.apply = true
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
	name, err := p.ident()
	if err != nil {
		return "", err
	}
	if p.acceptOp("(") {
		for !p.peek().isOp(")") {
			if p.peek().kind == tEOF {
				return "", errNear(p.peek())
			}
			p.next()
		}
		p.next()
	}
	return strings.ToLower(name), nil
}

func (p *parser) createStmt() (stmt, error) {
	p.next()
	switch {
	case p.accept("SCHEMA"):
		name, err := p.ident()
		if err != nil {
			return nil, err
		}
		if p.accept("AUTHORIZATION") {
			if _, err := p.ident(); err != nil {
				return nil, err
			}
		}
		return &createSchemaStmt{name: name}, nil
	case p.accept("TABLE"):
		return p.createTable()
	case p.peek().is("DATABASE"):
		return nil, errNotSupported("CREATE DATABASE (databases are created through the emulator's API or --db flag)")
	}
	return nil, errNotSupported("CREATE " + strings.ToUpper(p.peek().text))
}

func (p *parser) createTable() (stmt, error) {
	name, err := p.objName()
	if err != nil {
		return nil, err
	}
	s := &createTableStmt{name: name}
	if err := p.expectOp("("); err != nil {
		return nil, err
	}
	for {
		if p.accept("CONSTRAINT") {
			if err := p.constraint(&s.pk, &s.checks); err != nil {
				return nil, err
			}
		} else {
			col, err := p.ident()
			if err != nil {
				return nil, err
			}
			typ, err := p.typeName()
			if err != nil {
				return nil, err
			}
			cd := columnDef{Name: col, Type: typ}
			for {
				switch {
				case p.peek().is("NOT") && p.peekAt(1).is("NULL"):
					p.next()
					p.next()
					cd.NotNull = true
					continue
				case p.accept("NULL"):
					continue
				case p.peek().is("PRIMARY"):
					p.next()
					if err := p.expect("KEY"); err != nil {
						return nil, err
					}
					p.accept("CLUSTERED")
					p.accept("NONCLUSTERED")
					s.pk = &keyDef{Name: "PK_" + name.last(), Columns: []string{col}}
					continue
				case p.accept("IDENTITY"), p.accept("DEFAULT"):
					return nil, errNotSupported("IDENTITY/DEFAULT columns")
				}
				break
			}
			s.cols = append(s.cols, cd)
		}
		if !p.acceptOp(",") {
			break
		}
	}
	if err := p.expectOp(")"); err != nil {
		return nil, err
	}
	return s, nil
}

// constraint reads `name PRIMARY KEY [CLUSTERED] (col [ASC], ...)` or
// `name CHECK (expr)` after CONSTRAINT.
func (p *parser) constraint(pk **keyDef, checks *[]checkDef) error {
	cname, err := p.ident()
	if err != nil {
		return err
	}
	switch {
	case p.accept("PRIMARY"):
		if err := p.expect("KEY"); err != nil {
			return err
		}
		p.accept("CLUSTERED")
		p.accept("NONCLUSTERED")
		if err := p.expectOp("("); err != nil {
			return err
		}
		k := &keyDef{Name: cname}
		for {
			c, err := p.ident()
			if err != nil {
				return err
			}
			p.accept("ASC")
			p.accept("DESC")
			k.Columns = append(k.Columns, c)
			if !p.acceptOp(",") {
				break
			}
		}
		*pk = k
		return p.expectOp(")")
	case p.accept("CHECK"):
		if err := p.expectOp("("); err != nil {
			return err
		}
		start := p.peek().pos
		depth := 1
		for depth > 0 {
			t := p.next()
			switch {
			case t.kind == tEOF:
				return errNear(t)
			case t.isOp("("):
				depth++
			case t.isOp(")"):
				depth--
			}
		}
		text := p.sql[start:p.toks[p.i-1].pos]
		if _, err := (&parser{toks: mustLex(text), sql: text}).expr(); err != nil {
			return err
		}
		*checks = append(*checks, checkDef{Name: cname, Expr: text})
		return nil
	}
	return errNear(p.peek())
}

func mustLex(s string) []token {
	t, err := lex(s)
	if err != nil {
		return []token{{kind: tEOF}}
	}
	return t
}

func (p *parser) alterStmt() (stmt, error) {
	p.next()
	switch {
	case p.accept("TABLE"):
		name, err := p.objName()
		if err != nil {
			return nil, err
		}
		s := &alterTableStmt{name: name}
		if p.accept("WITH") {
			if !p.accept("CHECK") && !p.accept("NOCHECK") {
				return nil, errNear(p.peek())
			}
		}
		switch {
		case p.accept("ADD"):
			if err := p.expect("CONSTRAINT"); err != nil {
				return nil, err
			}
			var pk *keyDef
			var checks []checkDef
			if err := p.constraint(&pk, &checks); err != nil {
				return nil, err
			}
			if pk != nil {
				return nil, errNotSupported("ALTER TABLE ADD PRIMARY KEY")
			}
			s.check = &checks[0]
		case p.accept("CHECK"):
			if err := p.expect("CONSTRAINT"); err != nil {
				return nil, err
			}
			if _, err := p.ident(); err != nil {
				return nil, err
			}
		default:
			return nil, errNotSupported("ALTER TABLE " + strings.ToUpper(p.peek().text))
		}
		return s, nil
	case p.accept("DATABASE"):
		db, err := p.nameOrExpr()
		if err != nil {
			return nil, err
		}
		if err := p.expect("SET"); err != nil {
			return nil, err
		}
		opt, err := p.ident()
		if err != nil {
			return nil, err
		}
		opt = strings.ToUpper(opt)
		switch opt {
		case "SINGLE_USER", "MULTI_USER", "RESTRICTED_USER", "READ_ONLY", "READ_WRITE", "OFFLINE", "ONLINE":
		default:
			return nil, errNotSupported("ALTER DATABASE SET " + opt)
		}
		rollback := false
		if p.accept("WITH") {
			switch {
			case p.accept("ROLLBACK"):
				rollback = true
				if !p.accept("IMMEDIATE") {
					if err := p.expect("AFTER"); err != nil {
						return nil, err
					}
					p.next()
					p.accept("SECONDS")
				}
			case p.accept("NO_WAIT"):
			default:
				return nil, errNear(p.peek())
			}
		}
		return &alterDBStmt{db: db, option: opt, rollback: rollback}, nil
	}
	return nil, errNotSupported("ALTER " + strings.ToUpper(p.peek().text))
}

func (p *parser) insertStmt() (stmt, error) {
	p.next()
	p.accept("INTO")
	name, err := p.objName()
	if err != nil {
		return nil, err
	}
	s := &insertStmt{name: name}
	if p.acceptOp("(") {
		for {
			c, err := p.ident()
			if err != nil {
				return nil, err
			}
			s.cols = append(s.cols, c)
			if !p.acceptOp(",") {
				break
			}
		}
		if err := p.expectOp(")"); err != nil {
			return nil, err
		}
	}
	if !p.accept("VALUES") {
		if p.peek().is("SELECT") || p.peek().is("OUTPUT") {
			return nil, errNotSupported("INSERT ... " + strings.ToUpper(p.peek().text))
		}
		return nil, errNear(p.peek())
	}
	for {
		if err := p.expectOp("("); err != nil {
			return nil, err
		}
		var row []expr
		for {
			e, err := p.expr()
			if err != nil {
				return nil, err
			}
			row = append(row, e)
			if !p.acceptOp(",") {
				break
			}
		}
		if err := p.expectOp(")"); err != nil {
			return nil, err
		}
		s.rows = append(s.rows, row)
		if !p.acceptOp(",") {
			break
		}
	}
	return s, nil
}

func (p *parser) updateStmt() (stmt, error) {
	p.next()
	name, err := p.objName()
	if err != nil {
		return nil, err
	}
	s := &updateStmt{name: name}
	if err := p.expect("SET"); err != nil {
		return nil, err
	}
	for {
		var it setItem
		if p.peek().kind == tVar {
			it.variable = p.next().text
			if err := p.expectOp("="); err != nil {
				return nil, err
			}
			// @v = col = expr
			if (p.peek().kind == tIdent || p.peek().kind == tQIdent) && p.peekAt(1).isOp("=") {
				it.column = p.next().text
				p.next()
			}
		} else {
			col, err := p.objName()
			if err != nil {
				return nil, err
			}
			it.column = col.last()
			if !p.acceptOp("=") {
				if p.peek().isOp("+=") || p.peek().isOp("-=") {
					op := p.next().text[:1]
					e, err := p.expr()
					if err != nil {
						return nil, err
					}
					it.e = &binExpr{op: op, l: &colExpr{parts: []string{it.column}}, r: e}
					s.sets = append(s.sets, it)
					if !p.acceptOp(",") {
						break
					}
					continue
				}
				return nil, errNear(p.peek())
			}
		}
		if it.e, err = p.expr(); err != nil {
			return nil, err
		}
		s.sets = append(s.sets, it)
		if !p.acceptOp(",") {
			break
		}
	}
	if p.accept("OUTPUT") {
		for {
			e, err := p.expr()
			if err != nil {
				return nil, err
			}
			it := selItem{e: e}
			if p.accept("AS") {
				if it.alias, err = p.ident(); err != nil {
					return nil, err
				}
			}
			s.output = append(s.output, it)
			if !p.acceptOp(",") {
				break
			}
		}
		if p.peek().is("INTO") {
			return nil, errNotSupported("OUTPUT ... INTO")
		}
	}
	if p.accept("FROM") {
		return nil, errNotSupported("UPDATE ... FROM")
	}
	if p.accept("WHERE") {
		if s.where, err = p.expr(); err != nil {
			return nil, err
		}
	}
	return s, nil
}

func (p *parser) declareStmt() (stmt, error) {
	p.next()
	s := &declareStmt{}
	for {
		t := p.next()
		if t.kind != tVar {
			return nil, errNear(t)
		}
		p.accept("AS")
		if p.peek().is("TABLE") || p.peek().is("CURSOR") {
			return nil, errNotSupported("DECLARE " + strings.ToUpper(p.peek().text))
		}
		if _, err := p.typeName(); err != nil {
			return nil, err
		}
		var init expr
		if p.acceptOp("=") {
			e, err := p.expr()
			if err != nil {
				return nil, err
			}
			init = e
		}
		s.names = append(s.names, t.text)
		s.inits = append(s.inits, init)
		if !p.acceptOp(",") {
			break
		}
	}
	return s, nil
}

func (p *parser) setStmt() (stmt, error) {
	p.next()
	if t := p.peek(); t.kind == tVar {
		p.next()
		if err := p.expectOp("="); err != nil {
			return nil, err
		}
		e, err := p.expr()
		if err != nil {
			return nil, err
		}
		return &setVarStmt{name: t.text, e: e}, nil
	}
	// SET options (NOCOUNT ON, XACT_ABORT ON, ...) have no effect here.
	opt, err := p.ident()
	if err != nil {
		return nil, err
	}
	switch strings.ToUpper(opt) {
	case "NOCOUNT", "XACT_ABORT", "ANSI_NULLS", "ANSI_WARNINGS", "ANSI_PADDING", "QUOTED_IDENTIFIER", "ARITHABORT",
		"CONCAT_NULL_YIELDS_NULL", "ANSI_NULL_DFLT_ON", "IMPLICIT_TRANSACTIONS", "CURSOR_CLOSE_ON_COMMIT", "NUMERIC_ROUNDABORT":
		if !p.accept("ON") && !p.accept("OFF") {
			return nil, errNear(p.peek())
		}
	case "LANGUAGE":
		e, err := p.nameOrExpr()
		if err != nil {
			return nil, err
		}
		return &setOptionStmt{option: "LANGUAGE", value: e}, nil
	case "LOCK_TIMEOUT", "TEXTSIZE", "DEADLOCK_PRIORITY", "DATEFORMAT", "DATEFIRST", "TRANSACTION":
		for t := p.peek(); t.kind != tEOF && !t.isOp(";"); t = p.peek() {
			if t.kind == tIdent && (isKeyword(t) && !t.is("ON")) {
				break
			}
			p.next()
		}
	default:
		return nil, errNotSupported("SET " + strings.ToUpper(opt))
	}
	return &setOptionStmt{}, nil
}

func (p *parser) devices() ([]expr, error) {
	var out []expr
	for {
		if !p.accept("DISK") {
			if p.peek().is("URL") || p.peek().is("TAPE") {
				return nil, errNotSupported(strings.ToUpper(p.peek().text) + " backup devices")
			}
			return nil, errNear(p.peek())
		}
		if err := p.expectOp("="); err != nil {
			return nil, err
		}
		e, err := p.primary()
		if err != nil {
			return nil, err
		}
		switch e.(type) {
		case *litExpr, *varExpr:
		default:
			return nil, errNear(p.peek())
		}
		out = append(out, e)
		if !p.peek().isOp(",") || !p.peekAt(1).is("DISK") {
			return out, nil
		}
		p.next()
	}
}

// withOptions reads `WITH opt [= value], ...`; MOVE is collected apart.
// order lists the other options as given, repeats included.
func (p *parser) withOptions(moves *[]moveOpt) (opts map[string]expr, order []string, err error) {
	opts = map[string]expr{}
	if !p.accept("WITH") {
		return opts, nil, nil
	}
	for {
		name, err := p.ident()
		if err != nil {
			return nil, nil, err
		}
		name = strings.ToUpper(name)
		if name != "MOVE" || moves == nil {
			order = append(order, name)
		}
		if name == "MOVE" && moves != nil {
			from, err := p.primary()
			if err != nil {
				return nil, nil, err
			}
			if err := p.expect("TO"); err != nil {
				return nil, nil, err
			}
			to, err := p.primary()
			if err != nil {
				return nil, nil, err
			}
			*moves = append(*moves, moveOpt{logical: from, to: to})
		} else if p.acceptOp("=") {
			v, err := p.unary()
			if err != nil {
				return nil, nil, err
			}
			opts[name] = v
		} else {
			opts[name] = nil
		}
		if !p.acceptOp(",") {
			return opts, order, nil
		}
	}
}

func (p *parser) backupStmt() (stmt, error) {
	p.next()
	if !p.accept("DATABASE") {
		return nil, errNotSupported("BACKUP " + strings.ToUpper(p.peek().text))
	}
	db, err := p.nameOrExpr()
	if err != nil {
		return nil, err
	}
	if err := p.expect("TO"); err != nil {
		return nil, err
	}
	s := &backupStmt{db: db}
	if s.disks, err = p.devices(); err != nil {
		return nil, err
	}
	if p.peek().is("MIRROR") {
		return nil, errNotSupported("MIRROR TO")
	}
	if s.opts, s.order, err = p.withOptions(nil); err != nil {
		return nil, err
	}
	return s, nil
}

func (p *parser) restoreStmt() (stmt, error) {
	p.next()
	kw := strings.ToUpper(p.peek().text)
	s := &restoreStmt{kind: kw}
	switch kw {
	case "DATABASE":
		p.next()
		db, err := p.nameOrExpr()
		if err != nil {
			return nil, err
		}
		s.db = db
	case "FILELISTONLY", "HEADERONLY", "VERIFYONLY", "LABELONLY":
		p.next()
	default:
		return nil, errNotSupported("RESTORE " + kw)
	}
	if err := p.expect("FROM"); err != nil {
		return nil, err
	}
	var err error
	if s.disks, err = p.devices(); err != nil {
		return nil, err
	}
	if s.opts, s.order, err = p.withOptions(&s.moves); err != nil {
		return nil, err
	}
	return s, nil
}

func (p *parser) dbccStmt() (stmt, error) {
	p.next()
	cmd, err := p.ident()
	if err != nil {
		return nil, err
	}
	if !strings.EqualFold(cmd, "CHECKDB") {
		return nil, errNotSupported("DBCC " + strings.ToUpper(cmd))
	}
	s := &dbccStmt{}
	if p.acceptOp("(") {
		if !p.peek().isOp(")") {
			t := p.peek()
			if t.kind == tNumber {
				return nil, errNotSupported("DBCC CHECKDB by database id")
			}
			if s.db, err = p.nameOrExpr(); err != nil {
				return nil, err
			}
			if p.acceptOp(",") {
				opt, err := p.ident()
				if err != nil {
					return nil, err
				}
				if !strings.EqualFold(opt, "NOINDEX") {
					return nil, errNotSupported("DBCC CHECKDB repair options")
				}
			}
		}
		if err := p.expectOp(")"); err != nil {
			return nil, err
		}
	}
	if p.accept("WITH") {
		for {
			o, err := p.ident()
			if err != nil {
				return nil, err
			}
			o = strings.ToUpper(o)
			switch o {
			case "NO_INFOMSGS", "ALL_ERRORMSGS", "EXTENDED_LOGICAL_CHECKS", "DATA_PURITY", "PHYSICAL_ONLY", "TABLOCK", "ESTIMATEONLY":
			default:
				return nil, errNear(p.toks[p.i-1])
			}
			s.opts = append(s.opts, o)
			if !p.acceptOp(",") {
				break
			}
		}
	}
	return s, nil
}

func (p *parser) dropStmt() (stmt, error) {
	p.next()
	if !p.accept("DATABASE") {
		return nil, errNotSupported("DROP " + strings.ToUpper(p.peek().text))
	}
	s := &dropDBStmt{}
	if p.peek().is("IF") && p.peekAt(1).is("EXISTS") {
		p.next()
		p.next()
		s.ifExists = true
	}
	for {
		e, err := p.nameOrExpr()
		if err != nil {
			return nil, err
		}
		s.names = append(s.names, e)
		if !p.acceptOp(",") {
			return s, nil
		}
	}
}
