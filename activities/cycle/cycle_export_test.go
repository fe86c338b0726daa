package cycle

import (
	"testing"

	"github.com/backupcycle/backupcycle/internal/catalog"
	"github.com/backupcycle/backupcycle/internal/config"
	"github.com/backupcycle/backupcycle/internal/mssql"
	"github.com/backupcycle/backupcycle/internal/sambatest"
	"github.com/backupcycle/backupcycle/internal/sitetest"
	"github.com/backupcycle/backupcycle/internal/sqlsim"
)

// The emulator fixture, for the end-to-end tests of package activities_test
// (which import workflows, which imports this package).

// SQLFixture is the emulator fixture of cycle_sql_test.go.
type SQLFixture = sqlFixture

// NewSQLFixture starts two emulated instances and two backup directories;
// extra is YAML appended to the database's entry.
func NewSQLFixture(t *testing.T, db, extra string) *SQLFixture { return newSQLFixture(t, db, extra) }

// NewSQLFixtureWith is NewSQLFixture with some backup servers on Samba.
func NewSQLFixtureWith(t *testing.T, db, extra string, smb map[string]*sambatest.Server) *SQLFixture {
	return newSQLFixtureWith(t, db, extra, smb)
}

// NewSQLFixtureOf is the fixture on a site of any shape.
func NewSQLFixtureOf(t *testing.T, o sitetest.Options) *SQLFixture { return newSQLFixtureOf(t, o) }

func (f *sqlFixture) Acts() *Activities                                   { return f.acts }
func (f *sqlFixture) Config() *config.Config                              { return f.cfg }
func (f *sqlFixture) Source() *sqlsim.Instance                            { return f.src }
func (f *sqlFixture) Verify() *sqlsim.Instance                            { return f.verify }
func (f *sqlFixture) Dir(name string) string                              { return f.dirs[name] }
func (f *sqlFixture) Manifest(server string, seq int64) *catalog.Manifest { return f.load(server, seq) }
func (f *sqlFixture) ManifestOf(server, db string, seq int64) *catalog.Manifest {
	saved := f.db
	defer func() { f.db = saved }()
	f.db = db
	return f.load(server, seq)
}

// VerifySQL connects to the verification instance as the activities do.
func (f *sqlFixture) VerifySQL() *mssql.DB { return f.verifySQL() }

// SourceAheadWithCleanCheckDB: see sourceAheadWithCleanCheckDB.
func (f *sqlFixture) SourceAheadWithCleanCheckDB() { f.sourceAheadWithCleanCheckDB() }

func Statements(in *sqlsim.Instance, kind string) []sqlsim.StatementRecord {
	return statements(in, kind)
}

// RestartVerify restarts the verification instance with its emulator
// configuration changed by tweak (an upgrade): Verify follows.
func (f *sqlFixture) RestartVerify(tweak func(*sqlsim.Config)) *sqlsim.Instance {
	f.verify = f.site.RestartVerify(tweak)
	return f.verify
}

// RestartSource restarts the source instance on its data with its
// emulator configuration changed by tweak (a time zone): Source follows.
func (f *sqlFixture) RestartSource(tweak func(*sqlsim.Config)) { f.withSource(tweak) }
