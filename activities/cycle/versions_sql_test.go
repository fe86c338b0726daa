package cycle

import (
	"strings"
	"testing"

	"github.com/backupcycle/backupcycle/activities"
	"github.com/backupcycle/backupcycle/internal/sitetest"
	"github.com/backupcycle/backupcycle/internal/sqlsim"
)

// tdeFixture is a site whose source (emulator configuration src) holds
// database db encrypted by certificate TDECert, which the verification
// instance holds too.
func tdeFixture(t *testing.T, db string, src func(*sqlsim.Config)) *sqlFixture {
	t.Helper()
	f := newSQLFixtureOf(t, sitetest.Options{Database: db, LogicalName: "Sales'data", SourceConfig: src})
	cert, err := f.src.CreateCertificate("TDECert", "TDE certificate")
	if err != nil {
		t.Fatal(err)
	}
	if err := f.src.EnableTDE(db, "TDECert"); err != nil {
		t.Fatal(err)
	}
	if err := f.verify.ImportCertificate(cert); err != nil {
		t.Fatal(err)
	}
	return f
}

// planned runs the plan and backs up as the workflow does (the plan's
// mode), then writes the manifest.
func (f *sqlFixture) planned() (activities.Plan, int64) {
	f.t.Helper()
	var p activities.Plan
	f.must(f.acts.PlanCycle, activities.PlanInput{Database: f.db}, &p)
	var seq int64
	f.must(f.acts.AllocateSequence, activities.SequenceInput{Database: f.db, Method: p.Mode.Sequence}, &seq)
	var b activities.BackupOutput
	f.must(f.acts.Backup, activities.BackupInput{Database: f.db, Sequence: seq, Server: p.Rotation[0], Stripes: p.Stripes, Mode: p.RunMode()}, &b)
	f.must(f.acts.WriteManifest, activities.ManifestInput{Database: f.db, Sequence: seq, Server: p.Rotation[0], Backup: b}, nil)
	return p, seq
}

// SQL Server 2016 compresses a TDE database's backup only with an explicit
// MAXTRANSFERSIZE above 64 KiB: with max_transfer_size unset, the plan
// sends SQL Server's default for other databases, and the set is
// compressed.
func TestSQLTDEOn2016SendsMaxTransferSize(t *testing.T) {
	f := tdeFixture(t, "Tde2016", func(c *sqlsim.Config) { c.MajorVersion = 13 })
	p, seq := f.planned()
	bs := statements(f.src, "BACKUP DATABASE")
	if len(bs) != 1 || !strings.Contains(bs[0].SQL, "MAXTRANSFERSIZE = 1048576") {
		t.Errorf("BACKUP statements %v, want one with MAXTRANSFERSIZE = 1048576 (plan mode %+v)", bs, p.Mode)
	}
	m := f.load(p.Rotation[0], seq)
	if h := m.Header; h == nil || float64(h.CompressedBackupSize) > 0.7*float64(h.BackupSize) {
		t.Errorf("set of a TDE database on 2016: header %+v, want it compressed", m.Header)
	}
	if p.Mode.MaxTransferSize != 1<<20 || m.Options.MaxTransferSize != 1<<20 || !strings.Contains(strings.Join(p.Warnings, "\n"), "MAXTRANSFERSIZE = 1048576") {
		t.Errorf("plan mode %+v, warnings %q, manifest options %+v: want MAXTRANSFERSIZE 1 MiB planned, said and recorded", p.Mode, p.Warnings, m.Options)
	}
	if m.Header.SoftwareVersion != "13.0.6300" || m.Header.TDEThumbprint == "" {
		t.Errorf("manifest header %+v, want the writer's version and the TDE thumbprint", m.Header)
	}
}

// TDE and compression on SQL Server 2016 SP1 CU3, before the fixes of SP1
// CU4: the plan warns, naming the build to patch to.
func TestSQLTDECompressionRiskOn2016SP1CU3(t *testing.T) {
	f := tdeFixture(t, "Tde2016CU3", func(c *sqlsim.Config) { c.ProductVersion = "13.0.4435.0" })
	var p activities.Plan
	f.must(f.acts.PlanCycle, activities.PlanInput{Database: f.db}, &p)
	if !strings.Contains(strings.Join(p.Warnings, "\n"), "SP1 CU4") {
		t.Errorf("plan warnings %q, want one naming SQL Server 2016 SP1 CU4", p.Warnings)
	}
}
