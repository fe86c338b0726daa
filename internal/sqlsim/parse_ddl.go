package sqlsim

import (
	"slices"
	"strings"
)

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
	case p.accept("FUNCTION"):
		return p.createFunction()
	case p.accept("USER"):
		name, err := p.ident()
		if err != nil {
			return nil, err
		}
		if !p.accept("WITHOUT") {
			return nil, errNotSupported("CREATE USER other than WITHOUT LOGIN (users of logins are configured through the emulator's Login.Databases)")
		}
		if err := p.expect("LOGIN"); err != nil {
			return nil, err
		}
		s := &createUserStmt{name: name}
		if p.accept("WITH") {
			if err := p.expect("DEFAULT_SCHEMA"); err != nil {
				return nil, err
			}
			if err := p.expectOp("="); err != nil {
				return nil, err
			}
			if s.schema, err = p.ident(); err != nil {
				return nil, err
			}
		}
		return s, nil
	case p.peek().is("DATABASE"):
		return p.createDBParse()
	case p.peek().is("VIEW"):
		return p.createViewParse()
	case p.peek().is("UNIQUE"), p.peek().is("CLUSTERED"), p.peek().is("NONCLUSTERED"), p.peek().is("INDEX"):
		return p.createIndexParse()
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
	case p.accept("ROLE"):
		role, err := p.ident()
		if err != nil {
			return nil, err
		}
		s := &alterRoleStmt{role: role}
		switch {
		case p.accept("ADD"):
			s.add = true
		case p.accept("DROP"):
		default:
			return nil, errNotSupported("ALTER ROLE " + strings.ToUpper(p.peek().text))
		}
		if err := p.expect("MEMBER"); err != nil {
			return nil, err
		}
		if s.member, err = p.ident(); err != nil {
			return nil, err
		}
		return s, nil
	case p.accept("AUTHORIZATION"):
		if err := p.expect("ON"); err != nil {
			return nil, err
		}
		if !p.accept("DATABASE") {
			return nil, errNotSupported("ALTER AUTHORIZATION ON " + strings.ToUpper(p.peek().text))
		}
		if err := p.expectOp("::"); err != nil {
			return nil, err
		}
		db, err := p.ident()
		if err != nil {
			return nil, err
		}
		if err := p.expect("TO"); err != nil {
			return nil, err
		}
		login, err := p.ident()
		if err != nil {
			return nil, err
		}
		return &alterAuthStmt{db: db, login: login}, nil
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
		case "RECOVERY":
			// SET RECOVERY { FULL | BULK_LOGGED | SIMPLE } ("ALTER DATABASE
			// SET Options", <recovery_option>).
			v, err := p.ident()
			if err != nil {
				return nil, err
			}
			v = strings.ToUpper(v)
			if _, ok := recoveryModels[v]; !ok {
				return nil, errNear(p.toks[p.i-1])
			}
			return &alterDBStmt{db: db, option: opt, value: v}, nil
		case "TRUSTWORTHY", "PAGE_VERIFY":
			// TRUSTWORTHY { ON | OFF }, PAGE_VERIFY { CHECKSUM |
			// TORN_PAGE_DETECTION | NONE }
			// (https://learn.microsoft.com/en-us/sql/t-sql/statements/alter-database-transact-sql-set-options).
			v, err := p.ident()
			if err != nil {
				return nil, err
			}
			v = strings.ToUpper(v)
			valid := map[string][]string{"TRUSTWORTHY": {"ON", "OFF"}, "PAGE_VERIFY": {"CHECKSUM", "TORN_PAGE_DETECTION", "NONE"}}
			if !slices.Contains(valid[opt], v) {
				return nil, errNear(p.toks[p.i-1])
			}
			return &alterDBStmt{db: db, option: opt, value: v}, nil
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
	if p.peek().is("SELECT") {
		q, err := p.selectStmt()
		if err != nil {
			return nil, err
		}
		s.query = q
		return s, nil
	}
	if !p.accept("VALUES") {
		if p.peek().is("OUTPUT") {
			return nil, errNotSupported("INSERT ... OUTPUT")
		}
		return nil, errNear(p.peek())
	}
	for {
		row, err := p.args()
		if err != nil {
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
		typ, err := p.typeSpec()
		if err != nil {
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
		s.types = append(s.types, typ)
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
