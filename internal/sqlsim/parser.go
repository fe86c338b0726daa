package sqlsim

import (
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
		// parts is a schema-qualified (user-defined function) name as
		// written; nil for a built-in.
		parts []string
		args  []expr
		star  bool
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
	// args are a table-valued function's arguments (FROM
	// sys.dm_os_file_exists(@p)); nil for a table or view.
	args []expr
	// CROSS APPLY sys.dm_exec_sql_text(arg) alias, or
	// sys.dm_os_volume_stats(database_id, file_id) alias.
	apply      bool
	applyFn    string // lower case, without the schema
	applyArgs  []expr
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
	name  objName
	cols  []string
	rows  [][]expr
	query *selectStmt // INSERT ... SELECT, else rows
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
	types []typeSpec
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
	log   bool // BACKUP LOG
	db    expr
	disks []expr
	opts  map[string]expr // upper-case option -> value (nil for flags)
	order []string        // the options as given, repeats included
	enc   *encryptionSpec // WITH ENCRYPTION (...) (backupenc.go)
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
	value    string // TRUSTWORTHY ON|OFF, PAGE_VERIFY CHECKSUM|...
	rollback bool   // WITH ROLLBACK IMMEDIATE | AFTER n
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
		if _, ok := s.(*createFunctionStmt); ok && len(out) > 0 {
			// CREATE FUNCTION is alone in its batch ("CREATE FUNCTION
			// (Transact-SQL)": it must be the first statement in a batch).
			return nil, sqlErr(111, 15, "'CREATE FUNCTION' must be the first statement in a query batch.")
		}
		// "The CREATE VIEW must be the first statement in a query batch"
		// (https://learn.microsoft.com/en-us/sql/t-sql/statements/create-view-transact-sql).
		if _, ok := s.(*createViewStmt); ok && len(out) > 0 {
			return nil, sqlErr(111, 15, "'CREATE VIEW' must be the first statement in a query batch.")
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
	"DELETE": true, "MERGE": true, "TRUNCATE": true, "REVOKE": true, "DENY": true, "WHILE": true,
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
	case "RAISERROR":
		return p.raiseStmt()
	case "RETURN":
		p.next()
		if t := p.peek(); t.kind == tEOF || t.isOp(";") || t.is("END") || t.is("ELSE") {
			return &returnStmt{}, nil
		}
		e, err := p.expr()
		if err != nil {
			return nil, err
		}
		return &returnStmt{e: e}, nil
	case "REVERT":
		p.next()
		if p.peek().is("WITH") {
			return nil, errNotSupported("REVERT WITH COOKIE")
		}
		return &revertStmt{}, nil
	case "GRANT":
		return p.grantStmt()
	case "THROW":
		return p.throwStmt()
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
	if p.accept("AS") {
		return p.executeAs()
	}
	name, err := p.objName()
	if err != nil {
		return nil, err
	}
	n := len(name.parts)
	if strings.EqualFold(name.last(), "xp_cmdshell") && (n == 1 || strings.EqualFold(name.parts[n-2], "sys") ||
		strings.EqualFold(name.parts[n-2], "dbo") || name.parts[n-2] == "") {
		s := &xpCmdShellStmt{}
		if n == 3 {
			s.db = name.parts[0]
		}
		if s.command, err = p.expr(); err != nil {
			return nil, err
		}
		if p.acceptOp(",") {
			if !p.accept("NO_OUTPUT") {
				return nil, errNear(p.peek())
			}
			s.noOutput = true
		}
		return s, nil
	}
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

// executeAs reads the rest of EXECUTE AS USER = 'name' (after AS).
func (p *parser) executeAs() (stmt, error) {
	if !p.accept("USER") {
		return nil, errNotSupported("EXECUTE AS " + strings.ToUpper(p.peek().text))
	}
	if err := p.expectOp("="); err != nil {
		return nil, err
	}
	e, err := p.primary()
	if err != nil {
		return nil, err
	}
	if p.accept("WITH") {
		return nil, errNotSupported("EXECUTE AS USER ... WITH " + strings.ToUpper(p.peek().text))
	}
	return &executeAsStmt{user: e}, nil
}

// grantStmt reads GRANT perm [, perm] ON [OBJECT::]name TO principal.
func (p *parser) grantStmt() (stmt, error) {
	p.next()
	s := &grantStmt{}
	for {
		perm, err := p.ident()
		if err != nil {
			return nil, err
		}
		s.perms = append(s.perms, strings.ToUpper(perm))
		if !p.acceptOp(",") {
			break
		}
	}
	if !p.accept("ON") {
		return nil, errNotSupported("GRANT without ON (database or server permissions)")
	}
	if p.peek().is("OBJECT") && p.peekAt(1).isOp("::") {
		p.next()
		p.next()
	}
	o, err := p.objName()
	if err != nil {
		return nil, err
	}
	s.object = o
	if err := p.expect("TO"); err != nil {
		return nil, err
	}
	if s.principal, err = p.ident(); err != nil {
		return nil, err
	}
	if p.accept("WITH") {
		return nil, errNotSupported("GRANT ... WITH GRANT OPTION")
	}
	return s, nil
}
