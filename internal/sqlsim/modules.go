package sqlsim

import (
	"errors"
	"strings"

	"github.com/backupcycle/backupcycle/internal/sqlsim/tds"
)

// Scalar user-defined functions: CREATE FUNCTION s.f() RETURNS type [WITH
// EXECUTE AS OWNER|CALLER] AS BEGIN ... RETURN expr END, called as s.f()
// in an expression. The body may DECLARE and SET variables, branch with
// IF, run extended procedures (xp_cmdshell) and RETURN a value
// (https://learn.microsoft.com/en-us/sql/t-sql/statements/create-function-transact-sql:
// "User-defined functions can't be used to perform actions that modify
// the database state", and they may call extended stored procedures).
// It runs in the caller's security context, or its owner's (dbo) WITH
// EXECUTE AS OWNER; it reads the tables of its database through the
// ownership chain.

// funcDef is a function kept in the database's metadata.
type funcDef struct {
	Schema string `json:"schema"`
	Name   string `json:"name"`
	// ReturnType and ReturnArgs are the RETURNS type: "int", or
	// "nvarchar" with ["100"].
	ReturnType string   `json:"return_type"`
	ReturnArgs []string `json:"return_args,omitempty"`
	// ExecuteAsOwner: WITH EXECUTE AS OWNER (dbo of the database).
	ExecuteAsOwner bool `json:"execute_as_owner,omitempty"`
	// Body is the BEGIN ... END text, parsed again at each call.
	Body string `json:"body"`
}

type createFunctionStmt struct {
	name objName
	def  funcDef
}

// returnStmt is RETURN [expr]; returnValue carries its value out of a
// function body.
type (
	returnStmt  struct{ e expr }
	returnValue struct{ v any }
)

func (r *returnValue) Error() string { return "RETURN outside a function" }

func (p *parser) createFunction() (stmt, error) {
	name, err := p.objName()
	if err != nil {
		return nil, err
	}
	if err := p.expectOp("("); err != nil {
		return nil, err
	}
	if !p.acceptOp(")") {
		return nil, errNotSupported("CREATE FUNCTION with parameters")
	}
	if err := p.expect("RETURNS"); err != nil {
		return nil, err
	}
	if p.peek().is("TABLE") || p.peek().kind == tVar {
		return nil, errNotSupported("table-valued functions")
	}
	ret, err := p.typeSpec()
	if err != nil {
		return nil, err
	}
	s := &createFunctionStmt{name: name, def: funcDef{Name: name.last(), ReturnType: ret.name, ReturnArgs: ret.args}}
	if p.accept("WITH") {
		for {
			switch {
			case p.accept("EXECUTE") || p.accept("EXEC"):
				if err := p.expect("AS"); err != nil {
					return nil, err
				}
				switch {
				case p.accept("OWNER"):
					s.def.ExecuteAsOwner = true
				case p.accept("CALLER"):
				default:
					return nil, errNotSupported("EXECUTE AS " + strings.ToUpper(p.peek().text) + " on a function")
				}
			case p.accept("SCHEMABINDING"), p.accept("RETURNS"), p.accept("CALLED"):
				return nil, errNotSupported("function option " + strings.ToUpper(p.toks[p.i-1].text))
			default:
				return nil, errNear(p.peek())
			}
			if !p.acceptOp(",") {
				break
			}
		}
	}
	p.accept("AS")
	if !p.peek().is("BEGIN") {
		return nil, errNear(p.peek())
	}
	start := p.peek().pos
	body, err := p.statement()
	if err != nil {
		return nil, err
	}
	end := p.toks[p.i-1]
	s.def.Body = p.sql[start : end.pos+len(end.text)]
	if err := checkFunctionBody(body.(*blockStmt)); err != nil {
		return nil, err
	}
	return s, nil
}

// checkFunctionBody refuses what CREATE FUNCTION refuses: a SELECT that
// returns rows to the client (444), side effects (443), and a body whose
// last statement is not RETURN (455).
func checkFunctionBody(b *blockStmt) error {
	var walk func(st stmt) error
	walk = func(st stmt) error {
		switch n := st.(type) {
		case *blockStmt:
			for _, s := range n.list {
				if err := walk(s); err != nil {
					return err
				}
			}
		case *ifStmt:
			if err := walk(n.then); err != nil {
				return err
			}
			if n.els != nil {
				return walk(n.els)
			}
		case *declareStmt, *setVarStmt, *returnStmt, *xpCmdShellStmt:
		case *selectStmt:
			return sqlErr(444, 16, "Select statements included within a function cannot return data to a client.")
		default:
			return sqlErr(443, 16, "Invalid use of a side-effecting operator within a function.")
		}
		return nil
	}
	if err := walk(b); err != nil {
		return err
	}
	if len(b.list) == 0 {
		return sqlErr(455, 16, "The last statement included within a function must be a return statement.")
	}
	if _, ok := b.list[len(b.list)-1].(*returnStmt); !ok {
		return sqlErr(455, 16, "The last statement included within a function must be a return statement.")
	}
	return nil
}

// returns is the function's declared return type.
func (f *funcDef) returns() *varType {
	return declaredColumn(typeSpec{name: f.ReturnType, args: f.ReturnArgs})
}

func findFunction(md *metadata, schema, name string) *funcDef {
	for _, f := range md.Functions {
		if strings.EqualFold(f.Schema, schema) && strings.EqualFold(f.Name, name) {
			return f
		}
	}
	return nil
}

// createFunction stores the function in the current database (CREATE
// FUNCTION needs CREATE FUNCTION in the database and ALTER on the schema:
// db_owner or db_ddladmin).
func (x *execCtx) createFunction(n *createFunctionStmt) error {
	dbName, schema, name, err := x.resolveName(n.name)
	if err != nil {
		return err
	}
	if !strings.EqualFold(dbName, x.s.Database()) {
		return sqlErr(166, 15, "'CREATE/ALTER FUNCTION' does not allow specifying the database name as a prefix to the object name.")
	}
	if schema == "" {
		schema = "dbo"
	}
	d := x.currentDB()
	if d.system {
		return errNotSupported("CREATE FUNCTION in a system database")
	}
	if err := x.mayWrite(d, "CREATE FUNCTION"); err != nil {
		return err
	}
	return x.in.updateMetadata(d, func(md *metadata) error {
		if !containsFold(md.Schemas, schema) {
			return sqlErr(2760, 16, "The specified schema name \"%s\" either does not exist or you do not have permission to use it.", schema)
		}
		if findFunction(md, schema, name) != nil || findTable(md, schema, name) != nil {
			return sqlErr(2714, 16, "There is already an object named '%s' in the database.", name)
		}
		def := n.def
		def.Schema, def.Name = schema, name
		md.Functions = append(md.Functions, &def)
		return nil
	})
}

// userFunction finds the function a schema-qualified call names, in the
// current database or the one named.
func (x *execCtx) userFunction(parts []string) (*database, *funcDef, error) {
	o := objName{parts: parts}
	dbName, schema, name, err := x.resolveName(o)
	if err != nil {
		return nil, nil, err
	}
	missing := sqlErr(4121, 16, "Cannot find either column \"%s\" or the user-defined function or aggregate \"%s\", or the name is ambiguous.",
		parts[0], strings.Join(parts, "."))
	d := x.in.lookupDB(dbName)
	if d == nil || d.system {
		return nil, nil, missing
	}
	md, err := x.in.readMetadata(d)
	if err != nil {
		return nil, nil, err
	}
	f := findFunction(md, schema, name)
	if f == nil {
		return nil, nil, missing
	}
	return d, f, nil
}

// callFunction runs a scalar user-defined function. The caller needs
// EXECUTE on it (db_owner, a GRANT, or the ownership chain of a module of
// the same database), else 229; WITH EXECUTE AS OWNER its body runs as
// dbo, which needs dbo's login on this instance (15517 when the database's
// owner SID has none: MSSQLSERVER_15517).
func (x *execCtx) callFunction(f *funcExpr) (any, error) {
	d, def, err := x.userFunction(f.parts)
	if err != nil {
		return nil, err
	}
	if len(f.args) > 0 || f.star {
		return nil, sqlErr(8144, 16, "Procedure or function %s has too many arguments specified.", def.Name)
	}
	l := x.sessionLogin()
	if !x.in.dbUser(l, d) {
		return nil, errNoDBAccess(l.Name, d.Name)
	}
	key := strings.ToLower(def.Schema + "." + def.Name)
	inChain := x.chain != "" && strings.EqualFold(x.chain, d.Name)
	if !inChain && !x.in.isDBOwner(l, d) && !x.in.hasDB(l, d, "execute") && !x.in.hasDB(l, d, "execute on "+key) {
		return nil, errObjectDenied("EXECUTE", def.Name, d.Name, def.Schema)
	}
	module := x.module
	if def.ExecuteAsOwner {
		if module, err = x.in.userContext(d, "dbo"); err != nil {
			return nil, err
		}
		if module == nil {
			return nil, errCannotImpersonate("dbo")
		}
	}
	stmts, err := parse(def.Body)
	if err != nil {
		return nil, err
	}
	nx := &execCtx{ctx: x.ctx, in: x.in, s: x.s, w: x.w, req: x.req, vars: map[string]*variable{}, crashed: x.crashed,
		client: x.client, module: module, chain: d.Name, quiet: true}
	if module == nil {
		// The caller's context; a module reached through another keeps it.
		nx.module = x.module
	}
	prev := x.s.Database()
	x.s.setDatabase(d.Name)
	err = nx.runList(stmts)
	x.s.setDatabase(prev)
	var rv *returnValue
	if errors.As(err, &rv) {
		return def.returns().assign(rv.v), nil
	}
	if err != nil {
		return nil, err
	}
	return nil, sqlErr(455, 16, "The last statement included within a function must be a return statement.")
}

// returnFrom evaluates RETURN's value inside a function body.
func (x *execCtx) returnFrom(n *returnStmt) error {
	if !x.quiet || x.chain == "" {
		return errNotSupported("RETURN outside a function")
	}
	var v any
	if n.e != nil {
		var err error
		if v, err = (&env{x: x}).eval(n.e); err != nil {
			return err
		}
	}
	return &returnValue{v: v}
}

// functionColumn is the result column of a call to a user-defined
// function: its declared return type.
func (e *env) functionColumn(f *funcExpr, name string) (tds.Column, bool) {
	_, def, err := e.x.userFunction(f.parts)
	if err != nil || def.returns() == nil {
		return tds.Column{}, false
	}
	c := def.returns().col
	c.Name, c.Nullable = name, true
	return c, true
}
