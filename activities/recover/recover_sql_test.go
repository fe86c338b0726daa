package recover

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/backupcycle/backupcycle/activities"
	"github.com/backupcycle/backupcycle/internal/sitetest"
	"github.com/backupcycle/backupcycle/internal/sqlsim"
)

// The bad night at the activity level: bak01 is gone (directory and UNC
// path), and Sales is recovered from bak02 alone to a point between two
// log backups onto the remote site's instance. The copy holds exactly the
// rows the source committed at or before the point; every file was read
// from bak02, hash-checked, restored into the target's default paths
// with the BACKUP's tuning; each log was restored once.
func TestRecoverFromTheRemoteSiteAloneToAPoint(t *testing.T) {
	f := newFixture(t, sitetest.Options{Extra: "    buffer_count: 12\n    max_transfer_size: 2MiB\n"})
	hist := f.history(4)
	// Between log 2 and log 3: the commits after log 2 are split.
	point := hist[1].Finish.Add(hist[2].Start.Sub(hist[1].Finish) / 2)
	all := rows(t, f.site.Source, "Sales", time.Time{})
	f.primaryGone()

	p, fin, outs := f.recover(Request{Database: "Sales", Instance: "sql01", ToInstance: sitetest.VerifyInstance, As: "Sales_recovered", AsOf: point})
	if len(p.Unreachable) != 1 || !strings.HasPrefix(p.Unreachable[0], "bak01:") {
		t.Fatalf("unreachable %q, want bak01 named", p.Unreachable)
	}
	if !p.Restore.RecoveryPoint.Equal(point.UTC()) || p.Restore.RecoveryPointFrom != "stopat" {
		t.Fatalf("recovery point %s (%s), want %s", p.Restore.RecoveryPoint, p.Restore.RecoveryPointFrom, point)
	}
	if !strings.Contains(p.DirsFrom, "InstanceDefaultDataPath") || !strings.HasPrefix(p.Moves[0].PhysicalName, strings.TrimRight(p.DataDir, `\/`)) {
		t.Fatalf("files go to %q (%s), moves %+v", p.DataDir, p.DirsFrom, p.Moves)
	}
	if p.BufferCount != 12 || p.MaxTransferSize != 2<<20 || p.TargetVersion == "" || p.SourceVersion == "" {
		t.Fatalf("plan tuning %d/%d, versions %q/%q", p.BufferCount, p.MaxTransferSize, p.SourceVersion, p.TargetVersion)
	}
	for i, o := range outs {
		if o.Server != "bak02" || o.Skipped || o.Reattached {
			t.Fatalf("step %d: %+v, want read from bak02, done once", i, o)
		}
	}
	last := outs[len(outs)-1]
	if !last.Reached || len(outs)-1 > 3 {
		t.Fatalf("%d logs restored, the last %+v: want STOPAT reached by log 3", len(outs)-1, last)
	}
	if fin.State != "ONLINE" || len(fin.LogsRestored) != len(outs)-1 {
		t.Fatalf("finish %+v, want ONLINE with %d logs restored", fin, len(outs)-1)
	}
	stmt := ""
	for _, s := range sitetest.Statements(f.site.Verify, "RESTORE DATABASE") {
		if strings.Contains(s.SQL, " FROM ") {
			stmt = s.SQL
		}
	}
	if !strings.Contains(stmt, "[Sales_recovered]") || !strings.Contains(stmt, `\\bak02\backup\`) ||
		!strings.Contains(stmt, "CHECKSUM") || !strings.Contains(stmt, "BUFFERCOUNT = 12, MAXTRANSFERSIZE = 2097152") {
		t.Fatalf("the full's RESTORE: %s", stmt)
	}
	// The source's clock is the emulator's (UTC here): STOPAT names it.
	wall := point.Add(time.Duration(p.Restore.StopAtOffsetMinutes) * time.Minute).UTC()
	want := rows(t, f.site.Source, "Sales", wall)
	got := rows(t, f.site.Verify, "Sales_recovered", time.Time{})
	if !slices.Equal(got, want) {
		t.Fatalf("the copy holds %d rows, the source committed %d by %s", len(got), len(want), point)
	}
	if len(got) <= 10 || len(got) >= len(all) {
		t.Fatalf("the point split nothing: %d of %d rows", len(got), len(all))
	}
	if g := restoredLogGUIDs(t, f.site.Verify, "Sales_recovered"); len(g) != len(outs)-1 || len(slices.Compact(slices.Sorted(slices.Values(g)))) != len(g) {
		t.Fatalf("msdb restored logs %v, want %d, each once", g, len(outs)-1)
	}
	t.Logf("recovered to %s: %d of %d rows, set %d and %d logs from bak02", point, len(got), len(all), p.Restore.Full().Sequence, len(outs)-1)
}

// --latest, and every step run again after it succeeded or after the
// target crashed in the middle of a RESTORE LOG: what was restored is not
// restored again (msdb and the redo LSN), the cut-short log is restored
// on the retry, and the copy holds every row up to the last log.
func TestRecoverRestoresNothingTwice(t *testing.T) {
	f := newFixture(t, sitetest.Options{})
	hist := f.history(3)
	var p Plan
	f.must(New(nil).PlanRecover, PlanInput{Request: Request{Database: "Sales", ToInstance: sitetest.VerifyInstance, As: "Sales_dr", Latest: true}}, &p)
	if len(p.Restore.Logs()) != 3 || !p.Restore.RecoveryPoint.Equal(hist[2].Start) || p.Restore.RecoveryPointFrom != "last log's start" ||
		!p.Restore.RecoveryPointBound.Equal(hist[2].Finish) {
		t.Fatalf("plan: %d logs, recovery point %s (%s) bound %s, want 3 to %s, bounded by %s", len(p.Restore.Logs()), p.Restore.RecoveryPoint,
			p.Restore.RecoveryPointFrom, p.Restore.RecoveryPointBound, hist[2].Start, hist[2].Finish)
	}
	tg := Target{Database: "Sales", Instance: "sql01", To: sitetest.VerifyInstance, Name: "Sales_dr", AsGiven: true}
	in := RestoreFullInput{Target: tg, Step: p.Restore.Full(), Moves: p.Moves, Intent: p.Intent}
	var full, again StepOutput
	f.must(New(nil).RestoreFull, in, &full)
	f.must(New(nil).RestoreFull, in, &again)
	if full.Skipped || !again.Skipped || again.Copy.RestoreHistoryID != full.Copy.RestoreHistoryID {
		t.Fatalf("full %+v, again %+v: want the second skipped, same restore", full, again)
	}
	logIn := func(i int) RestoreLogInput {
		return RestoreLogInput{Target: tg, Step: p.Restore.Logs()[i], Index: i + 1, Count: 3, Copy: full.Copy}
	}
	var o StepOutput
	f.must(New(nil).RestoreLog, logIn(0), &o)
	f.must(New(nil).RestoreLog, logIn(0), &o)
	if !o.Skipped {
		t.Fatalf("log 1 again: %+v, want skipped", o)
	}
	if err := f.site.Verify.CrashAt(sqlsim.OpRestore, 50); err != nil {
		t.Fatal(err)
	}
	if err := f.run(New(nil).RestoreLog, logIn(1), &o); err == nil {
		t.Fatal("RestoreLog through a crash of the target: no error")
	}
	if err := f.site.Verify.Start(); err != nil {
		t.Fatal(err)
	}
	for i := 1; i < 3; i++ {
		o = StepOutput{}
		f.must(New(nil).RestoreLog, logIn(i), &o)
		if o.Skipped {
			t.Fatalf("log %d after the crash: %+v, want applied", i+1, o)
		}
	}
	var fin FinishOutput
	f.must(New(nil).FinishRecover, FinishInput{Target: tg, Copy: full.Copy}, &fin)
	f.must(New(nil).FinishRecover, FinishInput{Target: tg, Copy: full.Copy}, &fin)
	if fin.State != "ONLINE" || len(fin.LogsRestored) != 3 {
		t.Fatalf("finish %+v, want ONLINE with 3 logs", fin)
	}
	if g := restoredLogGUIDs(t, f.site.Verify, "Sales_dr"); len(g) != 3 || len(slices.Compact(slices.Sorted(slices.Values(g)))) != 3 {
		t.Fatalf("msdb restored logs %v, want 3, each once", g)
	}
	if ok := outcomes(f.site.Verify, "RESTORE DATABASE", "Sales_dr"); ok != 1 {
		t.Fatalf("%d RESTORE DATABASE of Sales_dr succeeded, want 1", ok)
	}
	if got, want := rows(t, f.site.Verify, "Sales_dr", time.Time{}), rows(t, f.site.Source, "Sales", time.Time{}); !slices.Equal(got, want) {
		t.Fatalf("the copy holds %d rows, the source %d", len(got), len(want))
	}
}

// outcomes counts kind's statements on in from a backup into db that
// ended ok.
func outcomes(in *sqlsim.Instance, kind, db string) int {
	n := 0
	for _, s := range sitetest.Statements(in, kind) {
		if s.Outcome == "ok" && strings.Contains(s.SQL, "["+db+"] FROM ") {
			n++
		}
	}
	return n
}

// What would fail late is refused by the plan, before anything is
// restored, each with its stable type: the source itself, a name taken, a
// point the backups do not reach, a target older than the source, a
// volume too small.
func TestPlanRecoverRefusesWhatWouldFailLate(t *testing.T) {
	f := newFixture(t, sitetest.Options{})
	f.keep = true
	hist := f.history(1)
	plan := func(in Request) (Plan, error) {
		var p Plan
		err := f.run(New(nil).PlanRecover, PlanInput{Request: in}, &p)
		return p, err
	}
	for _, tc := range []struct {
		name string
		in   Request
		typ  string
		says string
	}{
		{"the source itself", Request{Database: "Sales", ToInstance: "sql01", Latest: true}, activities.ErrTargetIsSource, "--replace"},
		{"the source, --replace alone", Request{Database: "Sales", ToInstance: "sql01", Latest: true, Replace: true}, activities.ErrTargetIsSource, "--as Sales"},
		{"no point", Request{Database: "Sales", ToInstance: sitetest.VerifyInstance}, activities.ErrInvalidConfig, "as_of"},
		{"before the full", Request{Database: "Sales", ToInstance: sitetest.VerifyInstance, AsOf: time.Now().Add(-time.Hour)},
			activities.ErrRecoveryPointUnreachable, "before the oldest verified full"},
		{"after the last log", Request{Database: "Sales", ToInstance: sitetest.VerifyInstance, AsOf: hist[0].Start.Add(time.Second)},
			activities.ErrRecoveryPointUnreachable, "--latest"},
		{"not configured", Request{Database: "Sales", ToInstance: "sql99", Latest: true}, activities.ErrInvalidConfig, "sql99"},
	} {
		_, err := plan(tc.in)
		if errType(err) != tc.typ || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("%s: %v, want %s saying %q", tc.name, err, tc.typ, tc.says)
		}
	}
	// Over the source with both --replace and --as of its name: to the
	// latest it needs --tail-log (TailLogNeeded); to a point the plan goes
	// through (and says what it replaces).
	if _, err := plan(Request{Database: "Sales", ToInstance: "sql01", As: "Sales", Replace: true, Latest: true}); errType(err) != activities.ErrTailLogNeeded {
		t.Fatalf("over the source to the latest without --tail-log: %v, want TailLogNeeded", err)
	}
	p, err := plan(Request{Database: "Sales", ToInstance: "sql01", As: "Sales", Replace: true, AsOf: hist[0].Start})
	if err != nil || !strings.HasPrefix(p.Replaces, "Sales (ONLINE") {
		t.Fatalf("over the source, asked twice: %+v, %v", p.Replaces, err)
	}
	// A name taken on the target.
	sitetest.ExecIn(t, f.site.Verify, "master", "CREATE DATABASE [Sales_taken]")
	if _, err := plan(Request{Database: "Sales", ToInstance: sitetest.VerifyInstance, As: "Sales_taken", Latest: true}); errType(err) != activities.ErrTargetDatabaseExists {
		t.Fatalf("name taken: %v, want TargetDatabaseExists", err)
	}
	if p, err := plan(Request{Database: "Sales", ToInstance: sitetest.VerifyInstance, As: "Sales_taken", Latest: true, Replace: true}); err != nil || p.Replaces == "" {
		t.Fatalf("name taken, --replace: %+v, %v", p.Replaces, err)
	}
	// A volume too small for the files' allocated size: the restore
	// directory's share (where the cycle's copies went) gets a quota.
	f.site.Verify.SetShareQuota(`D:\restore`, 1<<20)
	_, err = plan(Request{Database: "Sales", ToInstance: sitetest.VerifyInstance, As: "Sales_small", Latest: true,
		DataDir: `D:\restore\data`, LogDir: `D:\restore\log`})
	if errType(err) != activities.ErrTargetInstanceFull || !strings.Contains(err.Error(), "needed") {
		t.Fatalf("small volume: %v, want TargetInstanceFull", err)
	}
	f.site.Verify.SetShareQuota(`D:\restore`, 0)
	// A target older than the source (SQL Server 2019 for a 2022 backup).
	f.site.RestartVerify(func(c *sqlsim.Config) { c.MajorVersion = 15 })
	if _, err := plan(Request{Database: "Sales", ToInstance: sitetest.VerifyInstance, As: "Sales_old", Latest: true}); errType(err) != activities.ErrInvalidConfig ||
		!strings.Contains(err.Error(), "never restores a backup of a newer version") {
		t.Fatalf("older target: %v, want InvalidConfig naming the versions", err)
	}
}

// An encrypted database (TDE): a target without the certificate is
// refused by the plan, naming the thumbprint and how to install it; once
// it holds the certificate, the plan goes through.
func TestPlanRecoverNeedsTheTDECertificate(t *testing.T) {
	f := newFixture(t, sitetest.Options{})
	if _, err := f.site.Source.CreateCertificate("TDECert", "TDE of Sales"); err != nil {
		t.Fatal(err)
	}
	if err := f.site.Source.EnableTDE("Sales", "TDECert"); err != nil {
		t.Fatal(err)
	}
	cert, err := f.site.Source.ExportCertificate("TDECert")
	if err != nil {
		t.Fatal(err)
	}
	// The verification instance holds it while the full is verified.
	if err := f.site.Verify.ImportCertificate(cert); err != nil {
		t.Fatal(err)
	}
	f.history(1)
	if err := f.site.Verify.DropCertificate("TDECert"); err != nil {
		t.Fatal(err)
	}
	in := Request{Database: "Sales", ToInstance: sitetest.VerifyInstance, As: "Sales_tde", Latest: true}
	var p Plan
	err = f.run(New(nil).PlanRecover, PlanInput{Request: in}, &p)
	if errType(err) != activities.ErrInvalidConfig || !strings.Contains(err.Error(), cert.ThumbprintText()) || !strings.Contains(err.Error(), "CREATE CERTIFICATE") {
		t.Fatalf("target without the certificate: %v, want InvalidConfig naming %s and the fix", err, cert.ThumbprintText())
	}
	if err := f.site.Verify.ImportCertificate(cert); err != nil {
		t.Fatal(err)
	}
	if err := f.run(New(nil).PlanRecover, PlanInput{Request: in}, &p); err != nil || p.TDEThumbprint != cert.ThumbprintText() {
		t.Fatalf("with the certificate: %+v, %v", p.TDEThumbprint, err)
	}
}

// A database backed up WITH ENCRYPTION: a target without the certificate
// is refused by the plan, naming the thumbprint, the certificate and how to
// install it (a certificate of the same name with another key does not
// count); once it holds the certificate, the plan goes through.
func TestPlanRecoverNeedsTheBackupEncryptionCertificate(t *testing.T) {
	f := newFixture(t, sitetest.Options{Extra: "    encryption: {algorithm: AES_256, server_certificate: BackupCert}\n"})
	if _, err := f.site.Source.CreateCertificate("BackupCert", "backup encryption of Sales"); err != nil {
		t.Fatal(err)
	}
	cert, err := f.site.Source.ExportCertificate("BackupCert")
	if err != nil {
		t.Fatal(err)
	}
	if err := f.site.Verify.ImportCertificate(cert); err != nil {
		t.Fatal(err)
	}
	f.history(1)
	if err := f.site.Verify.DropCertificate("BackupCert"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.site.Verify.CreateCertificate("BackupCert", "same name, another key"); err != nil {
		t.Fatal(err)
	}
	in := Request{Database: "Sales", ToInstance: sitetest.VerifyInstance, As: "Sales_enc", Latest: true}
	var p Plan
	err = f.run(New(nil).PlanRecover, PlanInput{Request: in}, &p)
	if errType(err) != activities.ErrInvalidConfig || !strings.Contains(err.Error(), cert.ThumbprintText()) ||
		!strings.Contains(err.Error(), "WITH ENCRYPTION") || !strings.Contains(err.Error(), "CREATE CERTIFICATE [BackupCert]") {
		t.Fatalf("target without the certificate: %v, want InvalidConfig naming %s and the fix", err, cert.ThumbprintText())
	}
	if err := f.site.Verify.DropCertificate("BackupCert"); err != nil {
		t.Fatal(err)
	}
	if err := f.site.Verify.ImportCertificate(cert); err != nil {
		t.Fatal(err)
	}
	if err := f.run(New(nil).PlanRecover, PlanInput{Request: in}, &p); err != nil || p.EncryptorThumbprint != cert.ThumbprintText() {
		t.Fatalf("with the certificate: %+v, %v", p.EncryptorThumbprint, err)
	}
}

// A database backed up WITH ENCRYPTION by an asymmetric key of an EKM
// provider: a target without the key (one of the same name from another
// provider key does not count) is refused by the plan, naming the
// thumbprint and the statement that opens the provider key; once it holds
// the key, the plan goes through.
func TestPlanRecoverNeedsTheBackupEncryptionKey(t *testing.T) {
	f := newFixture(t, sitetest.Options{Extra: "    encryption: {algorithm: AES_256, server_asymmetric_key: EKMKey}\n"})
	key, err := f.site.Source.CreateAsymmetricKey("EKMKey", "AzureKeyVaultProvider", "backup-key")
	if err != nil {
		t.Fatal(err)
	}
	if err := f.site.Verify.OpenAsymmetricKey(key); err != nil {
		t.Fatal(err)
	}
	f.history(1)
	if err := f.site.Verify.DropAsymmetricKey("EKMKey"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.site.Verify.CreateAsymmetricKey("EKMKey", "AzureKeyVaultProvider", "another-key"); err != nil {
		t.Fatal(err)
	}
	in := Request{Database: "Sales", ToInstance: sitetest.VerifyInstance, As: "Sales_enc", Latest: true}
	var p Plan
	err = f.run(New(nil).PlanRecover, PlanInput{Request: in}, &p)
	if errType(err) != activities.ErrInvalidConfig || !strings.Contains(err.Error(), key.ThumbprintText()) ||
		!strings.Contains(err.Error(), "asymmetric key") || !strings.Contains(err.Error(), "CREATION_DISPOSITION = OPEN_EXISTING") {
		t.Fatalf("target without the key: %v, want InvalidConfig naming %s and the fix", err, key.ThumbprintText())
	}
	if err := f.site.Verify.DropAsymmetricKey("EKMKey"); err != nil {
		t.Fatal(err)
	}
	if err := f.site.Verify.OpenAsymmetricKey(key); err != nil {
		t.Fatal(err)
	}
	if err := f.run(New(nil).PlanRecover, PlanInput{Request: in}, &p); err != nil || p.EncryptorThumbprint != key.ThumbprintText() {
		t.Fatalf("with the key: %+v, %v", p.EncryptorThumbprint, err)
	}
}
