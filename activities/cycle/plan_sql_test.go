package cycle

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	_ "github.com/microsoft/go-mssqldb"

	"github.com/backupcycle/backupcycle/activities"
	"github.com/backupcycle/backupcycle/internal/config"
	"github.com/backupcycle/backupcycle/internal/plan"
	"github.com/backupcycle/backupcycle/internal/sqlsim"
)

// withSource restarts the fixture's source instance sql01 on the same data
// (its databases survive) with its configuration changed by tweak: an
// edition, a time zone.
func (f *sqlFixture) withSource(tweak func(*sqlsim.Config)) {
	f.t.Helper()
	f.src = f.site.RestartSource(tweak)
}

// execOn runs a statement on an emulated instance as sa.
func execOn(t *testing.T, in *sqlsim.Instance, stmt string, args ...any) {
	t.Helper()
	db, err := sql.Open("sqlserver", in.DSN("sa", sqlPassword, "master"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.ExecContext(context.Background(), stmt, args...); err != nil {
		t.Fatalf("%s: %v", stmt, err)
	}
}

func minutes(m *int) string {
	if m == nil {
		return "unknown"
	}
	return fmt.Sprintf("%+d minutes", *m)
}

func (f *sqlFixture) plan() activities.Plan {
	f.t.Helper()
	var p activities.Plan
	f.must(f.acts.PlanCycle, activities.PlanInput{Database: f.db}, &p)
	return p
}

// The plan reads the database's allocated size from sys.master_files, the
// edition and the server's time zone, and derives stripes: auto and every
// step timeout from the size.
func TestSQLPlanReadsSizeEditionAndTimeZone(t *testing.T) {
	f := newSQLFixture(t, "Sales", "")
	f.cfg.Databases[0].Stripes = config.StripesAuto
	f.withSource(func(c *sqlsim.Config) {
		c.Edition = "Standard"
		c.TimeZone = time.FixedZone("UTC+05:30", 5*3600+1800)
	})
	var onDisk int64
	files, err := f.src.DatabaseFiles("Sales")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range files {
		fi, err := os.Stat(name)
		if err != nil {
			t.Fatal(err)
		}
		onDisk += fi.Size()
	}
	p := f.plan()
	s := p.Source
	if !s.Read || s.SizeBytes != onDisk || s.LogBytes <= 0 || s.LogBytes >= s.SizeBytes {
		t.Errorf("source %+v, want the size of the database's %d files (%d bytes) with its log", s, len(files), onDisk)
	}
	if s.EngineEdition != plan.EngineStandard || !strings.Contains(s.Edition, "Standard") || s.Updateability != "READ_WRITE" {
		t.Errorf("source %+v, want Standard (engine edition 2), READ_WRITE", s)
	}
	if s.UTCOffsetMinutes == nil || *s.UTCOffsetMinutes != 330 {
		t.Errorf("server offset %s, want +330 minutes", minutes(s.UTCOffsetMinutes))
	}
	if !p.Mode.Compression || !p.Mode.CopyOnly || p.Mode.Sequence != f.cfg.Databases[0].Sequence || len(p.Warnings) != 0 {
		t.Errorf("mode %+v warnings %q, want the configuration's (compression, COPY_ONLY by default) and no warning", p.Mode, p.Warnings)
	}
	est, err := plan.SiteEstimate(onDisk, 1, 1, true, 0)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := plan.Timeouts(onDisk, est, plan.Overrides{})
	// No verified set: every rate is the site's assumption.
	_, want.Rates, _ = plan.Estimate(plan.SiteCycle(onDisk, 1, 1, true, 0), true, plan.Throughput{})
	l := p.Limits
	if p.Budget != want || l.BackupTimeout != want.Backup.StartToClose || l.BackupDeadline != want.Backup.ScheduleToClose ||
		l.RestoreTimeout != want.Restore.StartToClose || l.RestoreDeadline != want.Restore.ScheduleToClose ||
		l.CheckDBTimeout != want.CheckDB.StartToClose || l.CheckDBDeadline != want.CheckDB.ScheduleToClose ||
		l.CopyDeadline != want.Copy.ScheduleToClose || l.Heartbeat != plan.DefaultHeartbeat {
		t.Errorf("limits %+v budget %+v, want the timeouts of %d bytes %+v", l, p.Budget, onDisk, want)
	}
	// A small database: 2 files per NIC path.
	if p.Stripes != 2 {
		t.Errorf("stripes auto for %d bytes on one NIC path: %d, want 2", onDisk, p.Stripes)
	}
}

// Configured timeouts win over the derived ones.
func TestSQLPlanTimeoutOverrides(t *testing.T) {
	f := newSQLFixture(t, "Sales", "    backup_timeout: 20h\n    restore_timeout: 1d\n    checkdb_timeout: 30h\n    copy_deadline: 9h\n    heartbeat_timeout: 5m\n")
	l := f.plan().Limits
	if l.BackupTimeout != 20*time.Hour || l.RestoreTimeout != 24*time.Hour || l.CheckDBTimeout != 30*time.Hour ||
		l.CopyDeadline != 9*time.Hour || l.Heartbeat != 5*time.Minute {
		t.Errorf("limits %+v, want the configured timeouts", l)
	}
	if l.BackupDeadline <= l.BackupTimeout || l.RestoreDeadline <= l.RestoreTimeout || l.CheckDBDeadline <= l.CheckDBTimeout {
		t.Errorf("limits %+v: every step's deadline must leave room for a retry after its attempt timeout", l)
	}
}

// Express (and Web) cannot create compressed backups: the plan turns
// compression off and says so, and the BACKUP it plans succeeds where the
// configured one is refused.
func TestSQLPlanNoCompressionOnExpress(t *testing.T) {
	f := newSQLFixture(t, "Sales", "")
	f.withSource(func(c *sqlsim.Config) { c.Edition = "Express" })
	p := f.plan()
	if p.Source.EngineEdition != plan.EngineExpress || p.Mode.Compression || len(p.Warnings) != 1 ||
		!strings.Contains(p.Warnings[0], "Express") || !strings.Contains(p.Warnings[0], "without COMPRESSION") {
		t.Fatalf("plan on Express: source %+v mode %+v warnings %q, want compression off with a warning naming the edition", p.Source, p.Mode, p.Warnings)
	}
	var b activities.BackupOutput
	f.must(f.acts.Backup, activities.BackupInput{Database: f.db, Instance: "sql01", Sequence: 1, Server: p.Rotation[0], Stripes: p.Stripes, Mode: &p.Mode}, &b)
	bs := statements(f.src, "BACKUP DATABASE")
	if len(bs) != 1 || bs[0].Outcome != "ok" || strings.Contains(bs[0].SQL, " COMPRESSION") || !strings.Contains(bs[0].SQL, "NO_COMPRESSION") ||
		!strings.Contains(bs[0].SQL, "COPY_ONLY") {
		t.Errorf("BACKUP statements %+v, want one with NO_COMPRESSION and COPY_ONLY", bs)
	}
	// The manifest records what the set is, not what the configuration asked.
	f.must(f.acts.WriteManifest, activities.ManifestInput{Database: f.db, Instance: "sql01", Sequence: 1, Server: p.Rotation[0], Backup: b}, nil)
	if m := f.load(p.Rotation[0], 1); m.Options.Compression || !m.Options.CopyOnly || !m.Options.Checksum {
		t.Errorf("manifest options %+v, want uncompressed, COPY_ONLY, with checksums as sent", m.Options)
	}
	// What the configuration alone would send: SQL Server refuses it.
	err := f.run(f.acts.Backup, activities.BackupInput{Database: f.db, Instance: "sql01", Sequence: 2, Server: p.Rotation[0], Stripes: p.Stripes}, nil)
	if err == nil || !strings.Contains(err.Error(), "COMPRESSION") {
		t.Errorf("BACKUP WITH COMPRESSION on Express: %v, want SQL Server's refusal", err)
	}
}

// A read-only database is backed up COPY_ONLY even when this product owns
// the backup chain, and its run takes a sequence that writes nothing to it.
func TestSQLPlanReadOnlyDatabase(t *testing.T) {
	f := newSQLFixture(t, "Sales", "    owns_backup_chain: true\n    sequence: table\n")
	if db := f.cfg.Databases[0]; db.CopyOnly || db.Sequence != config.SequenceTable {
		t.Fatalf("configuration: copy_only %v sequence %s, want false and table", db.CopyOnly, db.Sequence)
	}
	p := f.plan()
	if p.Mode.CopyOnly || p.Mode.Sequence != config.SequenceTable || len(p.Warnings) != 0 {
		t.Fatalf("read-write database: mode %+v warnings %q, want the configuration's", p.Mode, p.Warnings)
	}
	execOn(t, f.src, "ALTER DATABASE [Sales] SET READ_ONLY")
	p = f.plan()
	if p.Source.Updateability != "READ_ONLY" || !p.Mode.CopyOnly || p.Mode.Sequence != config.SequenceCatalog || len(p.Warnings) != 2 {
		t.Fatalf("read-only database: source %+v mode %+v warnings %q, want COPY_ONLY and sequence catalog, both explained", p.Source, p.Mode, p.Warnings)
	}
	for _, w := range p.Warnings {
		if !strings.Contains(w, "READ_ONLY") {
			t.Errorf("warning %q does not say why", w)
		}
	}
	var b activities.BackupOutput
	f.must(f.acts.Backup, activities.BackupInput{Database: f.db, Instance: "sql01", Sequence: 1, Server: p.Rotation[0], Stripes: p.Stripes, Mode: &p.Mode}, &b)
	if bs := statements(f.src, "BACKUP DATABASE"); len(bs) != 1 || bs[0].Outcome != "ok" || !strings.Contains(bs[0].SQL, "COPY_ONLY") {
		t.Errorf("BACKUP of the read-only database: %+v, want one COPY_ONLY backup that succeeded", bs)
	}
}

// A source that cannot be asked does not stop the plan: the timeouts are
// those of UnknownSizeBytes and the plan says why.
func TestSQLPlanSourceUnreachable(t *testing.T) {
	f := newSQLFixture(t, "Sales", "")
	if err := f.src.Stop(); err != nil {
		t.Fatal(err)
	}
	p := f.plan()
	if p.Source.Read || p.Budget.Size != plan.UnknownSizeBytes || len(p.Warnings) != 1 || !strings.Contains(p.Warnings[0], "not read") {
		t.Errorf("plan with the source down: source %+v budget size %d warnings %q, want unknown facts, %d bytes assumed, one warning",
			p.Source, p.Budget.Size, p.Warnings, int64(plan.UnknownSizeBytes))
	}
	if !p.Mode.Compression || !p.Mode.CopyOnly {
		t.Errorf("mode %+v, want the configuration's", p.Mode)
	}
}

// max_age compares in the source server's time: a value written with
// GETDATE() just before the backup is fresh, one written in UTC by a server
// five hours ahead of UTC is five hours old. RESTORE HEADERONLY's finish
// date, the reference, is server-local too.
func TestSQLSanityMaxAgeInServerTime(t *testing.T) {
	f := newSQLFixture(t, "Sales", `      - name: local-stamp-fresh
        query: SELECT MAX(Stamp) FROM dbo.Local
        max_age: 1h
`)
	tz := time.FixedZone("UTC+5", 5*3600)
	f.withSource(func(c *sqlsim.Config) { c.TimeZone = tz })
	now := time.Now().Truncate(time.Second)
	// A wall clock as a datetime2 column holds it: no zone.
	wall := func(t time.Time) time.Time {
		return time.Date(t.Year(), t.Month(), t.Day(), t.Hour(), t.Minute(), t.Second(), 0, time.UTC)
	}
	for table, v := range map[string]time.Time{"Local": wall(now.In(tz)), "Utc": wall(now.UTC())} {
		execOn(t, f.src, fmt.Sprintf("CREATE TABLE [Sales].[dbo].[%s] (Stamp datetime2 NOT NULL)", table))
		execOn(t, f.src, fmt.Sprintf("INSERT INTO [Sales].[dbo].[%s] (Stamp) VALUES (@p1)", table), v)
	}
	p, seq, _ := f.backedUp()
	if p.Source.UTCOffsetMinutes == nil || *p.Source.UTCOffsetMinutes != 300 {
		t.Fatalf("plan's server offset %s, want +300 minutes", minutes(p.Source.UTCOffsetMinutes))
	}
	if h := f.load("bak01", seq).Header; h == nil || h.BackupFinish.Sub(now.Add(5*time.Hour)).Abs() > 10*time.Minute {
		// BackupFinish is the server's wall clock (UTC+5), decoded as UTC.
		t.Errorf("HEADERONLY finish %v, want the server's local time (%s)", h, now.In(tz).Format(time.DateTime))
	}
	f.must(f.acts.CopyToRemote, activities.CopyInput{Database: f.db, Sequence: seq, From: "bak01", To: "bak02"}, nil)
	verify := activities.VerifyInput{Database: f.db, Sequence: seq, Server: "bak02", SourceUTCOffsetMinutes: p.Source.UTCOffsetMinutes}
	f.must(f.acts.Restore, verify, nil)
	f.must(f.acts.SanityChecks, verify, nil)

	f.cfg.Databases[0].SanityChecks = []config.SanityCheck{{Name: "utc-stamp", Query: "SELECT MAX(Stamp) FROM dbo.Utc",
		Expect: config.ExpectMaxAge, MaxAge: time.Hour}}
	logged := f.observeLog()
	err := f.run(f.acts.SanityChecks, verify, nil)
	if activities.ErrorType(err) != activities.ErrSanityCheckFailed || !strings.Contains(err.Error(), "utc-stamp") {
		t.Errorf("a UTC stamp on a UTC+5 server: %v, want SanityCheckFailed of utc-stamp", err)
	}
	// The value and its age go to the worker's log, not into the history.
	if v := logged.value("sanity check did not hold"); !strings.Contains(v, "5h0") {
		t.Errorf("logged value %q, want it about 5h older than the backup", v)
	}
}

// A plan asked for the sequence allocates it as AllocateSequence does
// (recorded in the servers' sequence files, the next allocation above it);
// with the source down it plans without one, and the cycle allocates it.
func TestSQLPlanAllocatesTheSequence(t *testing.T) {
	f := newSQLFixture(t, "Sales", "")
	var p activities.Plan
	f.must(f.acts.PlanCycle, activities.PlanInput{Database: f.db, AllocateSequence: true}, &p)
	if p.Sequence <= 0 || f.recorded("bak01") != p.Sequence {
		t.Fatalf("plan allocated %d, bak01's sequence file holds %d: want a number, recorded", p.Sequence, f.recorded("bak01"))
	}
	if next := f.allocate(); next != p.Sequence+1 {
		t.Errorf("allocation after the plan's %d: %d, want the next number", p.Sequence, next)
	}
	if f.plan().Sequence != 0 {
		t.Error("a plan not asked for the sequence allocated one")
	}
	if err := f.src.Stop(); err != nil {
		t.Fatal(err)
	}
	var down activities.Plan
	f.must(f.acts.PlanCycle, activities.PlanInput{Database: f.db, AllocateSequence: true}, &down)
	if down.Sequence != 0 {
		t.Errorf("plan with the source down allocated %d, want none (the cycle waits for the source)", down.Sequence)
	}
}
