package sqlsim

import (
	"encoding/hex"
	"fmt"
	"path/filepath"
	"strings"
	"time"
)

// CREATE DATABASE, CREATE VIEW and CREATE INDEX on a view: what a login
// that may create databases needs to build a small database of its own (a
// table, rows, an indexed view), as `starter conformance` does.

type createDBStmt struct{ db expr }

// createViewStmt is CREATE VIEW [schema.]name [WITH SCHEMABINDING] AS
// <select>.
type createViewStmt struct {
	name        objName
	schemaBound bool
	query       *selectStmt
	text        string // the SELECT as written
}

// createIndexStmt is CREATE [UNIQUE] [CLUSTERED|NONCLUSTERED] INDEX name
// ON object (col, ...).
type createIndexStmt struct {
	name      string
	unique    bool
	clustered bool
	on        objName
	cols      []string
}

// viewDef is a view of a user database (CREATE VIEW), kept in its
// metadata with the indexes created on it. The emulator does not evaluate
// views: SELECT from one is 208, and a UNIQUE index is not checked against
// the view's rows.
type viewDef struct {
	Schema      string     `json:"schema"`
	Name        string     `json:"name"`
	ObjectID    uint32     `json:"object_id"`
	SchemaBound bool       `json:"schema_bound,omitempty"`
	Columns     []string   `json:"columns"`
	Definition  string     `json:"definition"`
	Indexes     []indexDef `json:"indexes,omitempty"`
}

type indexDef struct {
	Name      string   `json:"name"`
	Unique    bool     `json:"unique,omitempty"`
	Clustered bool     `json:"clustered,omitempty"`
	Columns   []string `json:"columns"`
}

// The size of a database CREATE DATABASE makes without file
// specifications: "When size isn't supplied for the primary file, the
// Database Engine uses the size of the primary file in the model database.
// The default size of model is 8 MB (beginning with SQL Server 2016
// (13.x))", and the log file gets the larger of 25 percent of the data
// files and 512 KB, at least model's log, 8 MB
// (https://learn.microsoft.com/en-us/sql/t-sql/statements/create-database-transact-sql).
// Of that, the system tables of a new database use a few megabytes, which
// a BACKUP holds; the rest is allocated and unused.
const (
	modelDataBytes = 8 << 20
	modelLogBytes  = 8 << 20
	newDBUsedBytes = 2 << 20 // the system tables of an empty database
	newDBLogUsed   = 512 << 10
)

// createDBParse reads CREATE DATABASE name; file specifications and
// options are not emulated.
func (p *parser) createDBParse() (stmt, error) {
	p.next() // DATABASE
	db, err := p.nameOrExpr()
	if err != nil {
		return nil, err
	}
	if t := p.peek(); t.kind != tEOF && !t.isOp(";") {
		for _, kw := range []string{"ON", "LOG", "COLLATE", "CONTAINMENT", "WITH", "FOR", "AS"} {
			if t.is(kw) {
				return nil, errNotSupported("CREATE DATABASE ... " + kw)
			}
		}
	}
	return &createDBStmt{db: db}, nil
}

// createDatabase runs CREATE DATABASE name: an empty database the size of
// model, in the instance's data directory, owned by the login that created
// it ("The owner is the login that creates the database"; permission:
// "CREATE DATABASE permission in the master database, or requires CREATE
// ANY DATABASE, or ALTER ANY DATABASE permission", else 262; a name in use
// is 1801: CREATE DATABASE (Transact-SQL),
// https://learn.microsoft.com/en-us/sql/t-sql/statements/create-database-transact-sql).
func (x *execCtx) createDatabase(n *createDBStmt) error {
	v, err := (&env{x: x}).eval(n.db)
	if err != nil {
		return err
	}
	name := toString(v)
	l := x.sessionLogin()
	if !l.hasServer("CREATE ANY DATABASE") {
		return errPermDenied("CREATE DATABASE", "master")
	}
	if x.in.lookupDB(name) != nil {
		return sqlErr(1801, 16, "Database '%s' already exists. Choose a different database name.", name)
	}
	spec := DatabaseSpec{Name: name, Size: newDBUsedBytes, FreeSize: modelDataBytes - newDBUsedBytes - bootPages*PageSize,
		LogSize: newDBLogUsed, LogFreeSize: modelLogBytes - newDBLogUsed, Empty: true}
	if err := x.in.createDatabase(spec, l.Name); err != nil {
		if x.in.lookupDB(name) != nil {
			return sqlErr(1801, 16, "Database '%s' already exists. Choose a different database name.", name)
		}
		return sqlErr(1802, 16, "CREATE DATABASE failed. Some file names listed could not be created. Check related errors. (emulator: %v)", err)
	}
	return nil
}

// createViewParse reads CREATE VIEW name [WITH SCHEMABINDING] AS SELECT
// ...; a column list and the other view attributes are not emulated.
func (p *parser) createViewParse() (stmt, error) {
	p.next() // VIEW
	name, err := p.objName()
	if err != nil {
		return nil, err
	}
	// "'CREATE/ALTER VIEW' does not allow specifying the database name as
	// a prefix to the object name" (CREATE VIEW (Transact-SQL): "view_name
	// ... Specifying the view owner name is optional", no database).
	if len(name.parts) >= 3 {
		return nil, sqlErr(166, 15, "'CREATE/ALTER VIEW' does not allow specifying the database name as a prefix to the object name.")
	}
	s := &createViewStmt{name: name}
	if p.peek().isOp("(") {
		return nil, errNotSupported("CREATE VIEW with a column list")
	}
	if p.accept("WITH") {
		a, err := p.ident()
		if err != nil {
			return nil, err
		}
		if !strings.EqualFold(a, "SCHEMABINDING") {
			return nil, errNotSupported("CREATE VIEW WITH " + strings.ToUpper(a))
		}
		s.schemaBound = true
	}
	if err := p.expect("AS"); err != nil {
		return nil, err
	}
	start := p.peek().pos
	if s.query, err = p.selectStmt(); err != nil {
		return nil, err
	}
	end := len(p.sql)
	if t := p.peek(); t.kind != tEOF {
		end = t.pos
	}
	s.text = strings.TrimSpace(p.sql[start:end])
	return s, nil
}

// createView runs CREATE VIEW in the session's database. A SCHEMABINDING
// view names its tables in two parts and lists its columns ("Names must be
// in two-part format", 4512; "Syntax '*' is not allowed in schema-bound
// objects", 1054: CREATE VIEW (Transact-SQL),
// https://learn.microsoft.com/en-us/sql/t-sql/statements/create-view-transact-sql).
// The SELECT runs once, so names it cannot resolve fail as they would.
func (x *execCtx) createView(n *createViewStmt) error {
	d := x.currentDB()
	if d.system {
		return errNotSupported("CREATE VIEW in a system database")
	}
	if err := x.mayWrite(d, "CREATE VIEW"); err != nil {
		return err
	}
	schema, name := "dbo", n.name.last()
	if len(n.name.parts) == 2 && n.name.parts[0] != "" {
		schema = n.name.parts[0]
	}
	if n.schemaBound {
		for _, it := range n.query.items {
			if it.star {
				return sqlErr(1054, 15, "Syntax '*' is not allowed in schema-bound objects.")
			}
		}
		names := []objName{}
		if n.query.from != nil {
			names = append(names, n.query.from.name)
			for _, j := range n.query.from.joins {
				names = append(names, j.name)
			}
		}
		for _, o := range names {
			if len(o.parts) != 2 {
				return sqlErr(4512, 16, "Cannot schema bind view '%s.%s' because name '%s' is invalid for schema binding. Names must be in two-part format and an object cannot reference itself.",
					schema, name, o.String())
			}
		}
	}
	rel, err := x.runSelect(n.query)
	if err != nil {
		return err
	}
	cols := make([]string, len(rel.cols))
	for i, c := range rel.cols {
		if c.name == "" {
			return sqlErr(4511, 16, "Create View or Function failed because no column name was specified for column %d.", i+1)
		}
		cols[i] = c.name
	}
	return x.in.updateMetadata(d, func(md *metadata) error {
		if !containsFold(md.Schemas, schema) {
			return sqlErr(2760, 16, "The specified schema name \"%s\" either does not exist or you do not have permission to use it.", schema)
		}
		if findTable(md, schema, name) != nil || findView(md, schema, name) != nil {
			return sqlErr(2714, 16, "There is already an object named '%s' in the database.", name)
		}
		md.Views = append(md.Views, &viewDef{Schema: schema, Name: name, ObjectID: uint32(1013578649 + 32000011*len(md.Views)),
			SchemaBound: n.schemaBound, Columns: cols, Definition: n.text})
		return nil
	})
}

func findView(md *metadata, schema, name string) *viewDef {
	for _, v := range md.Views {
		if strings.EqualFold(v.Schema, schema) && strings.EqualFold(v.Name, name) {
			return v
		}
	}
	return nil
}

// createIndexParse reads CREATE [UNIQUE] [CLUSTERED|NONCLUSTERED] INDEX
// name ON object (col [ASC|DESC], ...); index options are not emulated.
func (p *parser) createIndexParse() (stmt, error) {
	s := &createIndexStmt{}
	s.unique = p.accept("UNIQUE")
	switch {
	case p.accept("CLUSTERED"):
		s.clustered = true
	case p.accept("NONCLUSTERED"):
	}
	if err := p.expect("INDEX"); err != nil {
		return nil, err
	}
	var err error
	if s.name, err = p.ident(); err != nil {
		return nil, err
	}
	if err := p.expect("ON"); err != nil {
		return nil, err
	}
	if s.on, err = p.objName(); err != nil {
		return nil, err
	}
	if err := p.expectOp("("); err != nil {
		return nil, err
	}
	for {
		c, err := p.ident()
		if err != nil {
			return nil, err
		}
		p.accept("ASC")
		p.accept("DESC")
		s.cols = append(s.cols, c)
		if !p.acceptOp(",") {
			break
		}
	}
	if err := p.expectOp(")"); err != nil {
		return nil, err
	}
	if p.peek().is("WITH") || p.peek().is("INCLUDE") || p.peek().is("WHERE") {
		return nil, errNotSupported("CREATE INDEX ... " + strings.ToUpper(p.peek().text))
	}
	return s, nil
}

// createIndex runs CREATE INDEX on a view: "The first index created on a
// view must be a unique clustered index", on a view created WITH
// SCHEMABINDING (1939, 1940, 1941: Create indexed views,
// https://learn.microsoft.com/en-us/sql/relational-databases/views/create-indexed-views).
// Creating it needs ALTER on the view. Indexes on tables are not emulated.
func (x *execCtx) createIndex(n *createIndexStmt) error {
	d, schema, name, err := x.tableTarget(n.on)
	if err != nil {
		return err
	}
	if err := x.mayWrite(d, "ALTER"); err != nil {
		return err
	}
	return x.in.updateMetadata(d, func(md *metadata) error {
		if findTable(md, schema, name) != nil {
			return errNotSupported("CREATE INDEX on a table")
		}
		v := findView(md, schema, name)
		if v == nil {
			return sqlErr(1088, 16, "Cannot find the object \"%s\" because it does not exist or you do not have permissions.", n.on.String())
		}
		full := v.Schema + "." + v.Name
		switch {
		case !v.SchemaBound:
			return sqlErr(1939, 16, "Cannot create index on view '%s' because the view is not schema bound.", full)
		case len(v.Indexes) == 0 && n.clustered && !n.unique:
			return sqlErr(1941, 16, "Cannot create nonunique clustered index on view '%s' because only unique clustered indexes are allowed. Consider creating unique nonclustered index instead.", full)
		case len(v.Indexes) == 0 && !n.clustered:
			return sqlErr(1940, 16, "Cannot create index on view '%s'. It does not have a unique clustered index.", full)
		case n.clustered && len(v.Indexes) > 0:
			return sqlErr(1902, 16, "Cannot create more than one clustered index on view '%s'. Drop the existing clustered index '%s' before creating another.", full, v.Indexes[0].Name)
		}
		for _, ix := range v.Indexes {
			if strings.EqualFold(ix.Name, n.name) {
				return sqlErr(1913, 16, "The operation failed because an index or statistics with name '%s' already exists on view '%s'.", n.name, full)
			}
		}
		for _, c := range n.cols {
			if !containsFold(v.Columns, c) {
				return sqlErr(1911, 16, "Column name '%s' does not exist in the target table or view.", c)
			}
		}
		v.Indexes = append(v.Indexes, indexDef{Name: n.name, Unique: n.unique, Clustered: n.clustered, Columns: n.cols})
		return nil
	})
}

// createDatabase creates a database from spec, owned by the login owner
// ("" or sa: sa; CREATE DATABASE passes its creator, CreateDatabase
// spec.Owner).
func (in *Instance) createDatabase(spec DatabaseSpec, owner string) error {
	if spec.Name == "" {
		return fmt.Errorf("sqlsim: DatabaseSpec.Name is empty")
	}
	if spec.Size <= 0 {
		spec.Size = 8 << 20
	}
	in.mu.Lock()
	if in.lookupDBLocked(spec.Name) != nil {
		in.mu.Unlock()
		return fmt.Errorf("sqlsim: database %q already exists on %s; drop it first or pick another name", spec.Name, in.cfg.Name)
	}
	id := in.newDatabaseIDLocked()
	if in.pendingIDs == nil {
		in.pendingIDs = map[int]bool{}
	}
	in.pendingIDs[id] = true // until the database is in the catalog
	lsn := in.nextLSN(1000)
	in.mu.Unlock()
	defer func() {
		in.mu.Lock()
		delete(in.pendingIDs, id)
		in.mu.Unlock()
	}()
	files, err := layoutFiles(spec, id, filepath.Join(in.cfg.DataDir, "data"))
	if err != nil {
		return fmt.Errorf("sqlsim: %w", err)
	}
	if in.engineEdition() == 4 && dataBytes(files) > expressMaxBytes {
		// What CREATE DATABASE answers with 1827 (see expressMaxBytes).
		return fmt.Errorf("sqlsim: database %q: %d bytes of data files exceed Express's %d MB per database", spec.Name, dataBytes(files), expressMaxBytes>>20)
	}
	md, err := planTables(spec, files)
	if err != nil {
		return fmt.Errorf("sqlsim: %w", err)
	}
	model, err := checkRecoveryModel(spec.RecoveryModel)
	if err != nil {
		return fmt.Errorf("sqlsim: database %q: %w", spec.Name, err)
	}
	if spec.CommitLog || spec.CommitRate > 0 {
		addCommitLog(md, files, spec.CommitLogRows)
	}
	ownerName := ""
	if owner != "" && !strings.EqualFold(owner, "sa") {
		l := in.principal(owner)
		if l == nil {
			return fmt.Errorf("sqlsim: database %q: owner %q is not a login of %s", spec.Name, owner, in.cfg.Name)
		}
		ownerName, md.DboSID = l.Name, hex.EncodeToString(in.loginSID(l))
	}
	switch pv := strings.ToUpper(spec.PageVerify); pv {
	case "", "CHECKSUM":
	case "TORN_PAGE_DETECTION", "NONE":
		md.PageVerify = pv
	default:
		return fmt.Errorf("sqlsim: database %q: PageVerify %q is not CHECKSUM, TORN_PAGE_DETECTION or NONE", spec.Name, spec.PageVerify)
	}
	md.BrokerGUID, md.BrokerEnabled = newGUID(), spec.BrokerEnabled
	if err := writeDatabaseFiles(spec.Name, files, md, lsn); err != nil {
		return fmt.Errorf("sqlsim: create database %q: %w", spec.Name, err)
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.lookupDBLocked(spec.Name) != nil {
		removeFiles(files)
		return fmt.Errorf("sqlsim: database %q was created concurrently", spec.Name)
	}
	nd := &database{ID: id, Name: spec.Name, Files: files, Created: in.serverTime(time.Now()), UserAccess: "MULTI_USER", FamilyGUID: newGUID(),
		Owner: ownerName, RecoveryModel: model, EndLSN: lsn + 1, CheckpointLSN: lsn, CommitRate: max(spec.CommitRate, 0)}
	if spec.Contained {
		nd.Containment = 1
	}
	in.cat.Databases = append(in.cat.Databases, nd)
	if nd.CommitRate > 0 && in.running {
		in.startWorkloadLocked(nd.Name, nd.CommitRate)
	}
	return in.saveCatalog()
}
