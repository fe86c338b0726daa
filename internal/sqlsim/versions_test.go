package sqlsim

import (
	"bytes"
	"database/sql"
	"fmt"
	"strings"
	"testing"
)

// versioned is a Config change giving the instance a build.
func versioned(productVersion string) func(*Config) {
	return func(c *Config) { c.ProductVersion = productVersion }
}

// peerOf starts a second instance (a verification server) that sees e's
// backup share under the same UNC path.
func (e *testEnv) peerOf(t *testing.T, name string, mod ...func(*Config)) *testEnv {
	t.Helper()
	p := newEnv(t, append([]func(*Config){func(c *Config) {
		c.Name = name
		c.Shares[`\\bak01\backup`] = e.shareDir
	}}, mod...)...)
	p.shareDir = e.shareDir
	return p
}

// backupTo backs db up to one stripe on \\bak01\backup with the WITH
// options given and returns the stripe's path.
func (e *testEnv) backupTo(t *testing.T, db, file, with string) string {
	t.Helper()
	path := `\\bak01\backup\` + file
	mustRun(t, e.db, fmt.Sprintf("BACKUP DATABASE %s TO DISK = %s WITH INIT, FORMAT%s", qi(db), ql(path), with))
	return path
}

// restoreAs is the product's RESTORE of a stripe into name under R:\restore.
func restoreAs(name, path string) string {
	return fmt.Sprintf("RESTORE DATABASE %s FROM DISK = %s WITH MOVE N'Sales' TO %s, MOVE N'Sales_log' TO %s, CHECKSUM, REPLACE",
		qi(name), ql(path), ql(`R:\restore\`+name+`.mdf`), ql(`R:\restore\`+name+`.ldf`))
}

// header reads one HEADERONLY row by column name.
func header(t *testing.T, db *sql.DB, path string) map[string]any {
	t.Helper()
	r := mustRun(t, db, "RESTORE HEADERONLY FROM DISK = "+ql(path))
	if len(r.rows) != 1 {
		t.Fatalf("HEADERONLY: %d rows", len(r.rows))
	}
	out := map[string]any{}
	for i, c := range r.cols {
		out[c] = r.rows[0][i]
	}
	return out
}

// A backup is read by its own and newer major versions only: an older one
// answers 3241 to HEADERONLY and FILELISTONLY and 3169 to RESTORE
// DATABASE, naming both versions.
func TestBackupOfANewerMajorVersion(t *testing.T) {
	src := newEnv(t) // 2022
	src.create(t, DatabaseSpec{Name: "Sales", Size: 2 << 20})
	older := src.peerOf(t, "verify2019", versioned("15.0.4385.2"))
	path := src.backupTo(t, "Sales", "new.bak", ", CHECKSUM")

	r := wantErrs(t, older.db, []int32{3241, 3013}, "RESTORE HEADERONLY FROM DISK = "+ql(path))
	if got := r.errs[1].Message; got != "RESTORE HEADERONLY is terminating abnormally." {
		t.Errorf("3013 after HEADERONLY: %q", got)
	}
	r = wantErrs(t, older.db, []int32{3241, 3013}, "RESTORE FILELISTONLY FROM DISK = "+ql(path))
	if got := r.errs[1].Message; got != "RESTORE FILELIST is terminating abnormally." {
		t.Errorf("3013 after FILELISTONLY: %q", got)
	}
	r = wantErrs(t, older.db, []int32{3169, 3013}, restoreAs("Sales_verify", path))
	if msg := r.errs[0].Message; !strings.Contains(msg, "version 16.00.4135. That version is incompatible") ||
		!strings.Contains(msg, "which is running version 15.00.4385.") || r.errs[0].Class != 16 {
		t.Errorf("3169: class %d %q", r.errs[0].Class, msg)
	}

	// The other way round works, and HEADERONLY names the writer.
	older.create(t, DatabaseSpec{Name: "Sales", Size: 2 << 20})
	oldPath := older.backupTo(t, "Sales", "old.bak", "")
	h := header(t, src.db, oldPath)
	if asInt(h["SoftwareVersionMajor"]) != 15 || asInt(h["SoftwareVersionMinor"]) != 0 || asInt(h["SoftwareVersionBuild"]) != 4385 ||
		asInt(h["DatabaseVersion"]) != 904 || asInt(h["CompatibilityLevel"]) != 150 {
		t.Errorf("HEADERONLY of a 2019 backup: version %v.%v.%v, database version %v, level %v", h["SoftwareVersionMajor"],
			h["SoftwareVersionMinor"], h["SoftwareVersionBuild"], h["DatabaseVersion"], h["CompatibilityLevel"])
	}
	mustRun(t, src.db, restoreAs("Sales_from2019", oldPath))
}

// SQL Server 2022 added three HEADERONLY columns; 2019 has none of them.
func TestHeaderOnlyColumnsPerVersion(t *testing.T) {
	for _, tc := range []struct {
		version string
		want    bool
	}{{"15.0.4385.2", false}, {"16.0.4135.4", true}} {
		e := newEnv(t, versioned(tc.version))
		e.create(t, DatabaseSpec{Name: "Sales", Size: 2 << 20})
		h := header(t, e.db, e.backupTo(t, "Sales", "h.bak", ", COMPRESSION"))
		_, has := h["CompressionAlgorithm"]
		if has != tc.want {
			t.Errorf("%s: CompressionAlgorithm column present %v, want %v", tc.version, has, tc.want)
		}
		if has && h["CompressionAlgorithm"] != "MS_XPRESS" {
			t.Errorf("%s: CompressionAlgorithm %v", tc.version, h["CompressionAlgorithm"])
		}
	}
	if _, err := New(Config{DataDir: t.TempDir(), ProductVersion: "15.0.9999.1"}); err == nil ||
		!strings.Contains(err.Error(), "15.0.4198.2") {
		t.Errorf("an unknown build: %v, want an error listing the known ones", err)
	}
	if _, err := New(Config{DataDir: t.TempDir(), MajorVersion: 16, ProductVersion: "15.0.4198.2"}); err == nil {
		t.Error("a 2019 build on MajorVersion 16 accepted")
	}
}

// tdeSource is an instance with database Sales encrypted by certificate
// TDECert.
func tdeSource(t *testing.T, mod ...func(*Config)) (*testEnv, Certificate) {
	t.Helper()
	src := newEnv(t, mod...)
	src.create(t, DatabaseSpec{Name: "Sales", Size: 2 << 20})
	cert, err := src.in.CreateCertificate("TDECert", "TDE certificate")
	if err != nil {
		t.Fatal(err)
	}
	if err := src.in.EnableTDE("Sales", "TDECert"); err != nil {
		t.Fatal(err)
	}
	return src, cert
}

// A TDE database's backup is read only where master holds its certificate:
// 33111 (state 3) and 3013 otherwise, for every RESTORE form.
func TestTDEBackupNeedsTheCertificate(t *testing.T) {
	src, cert := tdeSource(t)
	var enc bool
	if err := src.db.QueryRow("SELECT is_encrypted FROM sys.databases WHERE name = N'Sales'").Scan(&enc); err != nil || !enc {
		t.Fatalf("is_encrypted: %v, %v", enc, err)
	}
	var tp []byte
	var typ string
	if err := src.db.QueryRow("SELECT encryptor_thumbprint, encryptor_type FROM sys.dm_database_encryption_keys WHERE database_id = DB_ID(N'Sales')").
		Scan(&tp, &typ); err != nil || !bytes.Equal(tp, cert.Thumbprint) || typ != "CERTIFICATE" {
		t.Fatalf("dm_database_encryption_keys: %x %q, %v; want %x", tp, typ, err, cert.Thumbprint)
	}
	var name string
	var backedUp sql.NullTime
	q := "SELECT name, pvt_key_last_backup_date FROM master.sys.certificates WHERE thumbprint = @p1"
	if err := src.db.QueryRow(q, cert.Thumbprint).Scan(&name, &backedUp); err != nil || name != "TDECert" || backedUp.Valid {
		t.Fatalf("master.sys.certificates: %q backed up %v, %v", name, backedUp, err)
	}

	path := src.backupTo(t, "Sales", "tde.bak", ", CHECKSUM, COMPRESSION")
	r := mustRun(t, src.db, "RESTORE FILELISTONLY FROM DISK = "+ql(path))
	col := -1
	for i, c := range r.cols {
		if c == "TDEThumbprint" {
			col = i
		}
	}
	if col < 0 || !bytes.Equal(r.rows[0][col].([]byte), cert.Thumbprint) {
		t.Errorf("FILELISTONLY TDEThumbprint: %v, want %x", r.rows[0], cert.Thumbprint)
	}

	dst := src.peerOf(t, "verify01")
	for _, stmt := range []string{"RESTORE HEADERONLY FROM DISK = " + ql(path), "RESTORE FILELISTONLY FROM DISK = " + ql(path),
		restoreAs("Sales_verify", path)} {
		r := wantErrs(t, dst.db, []int32{33111, 3013}, stmt)
		e := r.errs[0]
		if want := "Cannot find server certificate with thumbprint '" + cert.ThumbprintText() + "'."; e.Message != want ||
			e.Class != 16 || e.State != 3 {
			t.Errorf("%s: class %d state %d %q, want %q", short(stmt), e.Class, e.State, e.Message, want)
		}
	}

	// BACKUP CERTIFICATE on the source, CREATE CERTIFICATE ... FROM FILE on
	// the verification instance: the backup restores, encrypted.
	exported, err := src.in.ExportCertificate("TDECert")
	if err != nil {
		t.Fatal(err)
	}
	if err := src.db.QueryRow(q, cert.Thumbprint).Scan(&name, &backedUp); err != nil || !backedUp.Valid {
		t.Errorf("pvt_key_last_backup_date after the export: %v, %v", backedUp, err)
	}
	if err := dst.in.ImportCertificate(exported); err != nil {
		t.Fatal(err)
	}
	mustRun(t, dst.db, restoreAs("Sales_verify", path))
	if err := dst.db.QueryRow("SELECT is_encrypted FROM sys.databases WHERE name = N'Sales_verify'").Scan(&enc); err != nil || !enc {
		t.Errorf("restored copy is_encrypted: %v, %v", enc, err)
	}
}

// sys.dm_database_encryption_keys needs VIEW SERVER STATE (2022: VIEW
// SERVER SECURITY STATE, implied by it); master's certificates are visible
// with VIEW ANY DEFINITION only.
func TestTDEMetadataPermissions(t *testing.T) {
	logins := []Login{{Name: "plain", Password: testPass}, {Name: "viewer", Password: testPass, Server: []string{"VIEW SERVER STATE"}},
		{Name: "security", Password: testPass, Server: []string{"VIEW SERVER SECURITY STATE"}},
		{Name: "definer", Password: testPass, Server: []string{"VIEW ANY DEFINITION"}}}
	src, _ := tdeSource(t, func(c *Config) { c.Principals = logins; c.Logins = map[string]string{"sa": testPass} })
	const keys = "SELECT encryptor_thumbprint FROM sys.dm_database_encryption_keys"
	r := wantErrs(t, src.openAs(t, "plain", testPass, ""), []int32{300, 297}, keys)
	if !strings.HasPrefix(r.errs[0].Message, "VIEW SERVER SECURITY STATE permission was denied") {
		t.Errorf("300 on 2022: %q", r.errs[0].Message)
	}
	for _, user := range []string{"viewer", "security"} {
		if r := mustRun(t, src.openAs(t, user, testPass, ""), keys); len(r.rows) != 1 {
			t.Errorf("%s: %d encryption keys, want 1", user, len(r.rows))
		}
	}
	const certs = "SELECT name FROM master.sys.certificates"
	for user, want := range map[string]int{"plain": 0, "viewer": 0, "definer": 1} {
		if r := mustRun(t, src.openAs(t, user, testPass, ""), certs); len(r.rows) != want {
			t.Errorf("%s sees %d certificates, want %d", user, len(r.rows), want)
		}
	}
}

// KB5014298: a compressed backup of a TDE database made on SQL Server 2019
// CU16 or later cannot be restored on CU15 or earlier: RESTORE DATABASE
// answers 3013 and 9004 (severity 21) and the session stays; HEADERONLY and
// FILELISTONLY read it. An uncompressed one, or one read by CU16, restores.
func TestTDECompressedFormatOf2019CU16(t *testing.T) {
	src, cert := tdeSource(t, versioned("15.0.4223.1"))
	dst := src.peerOf(t, "verify01", versioned("15.0.4198.2"))
	if err := dst.in.ImportCertificate(cert); err != nil {
		t.Fatal(err)
	}
	compressed := src.backupTo(t, "Sales", "c.bak", ", CHECKSUM, COMPRESSION")
	plain := src.backupTo(t, "Sales", "p.bak", ", CHECKSUM")
	mustRun(t, dst.db, "RESTORE HEADERONLY FROM DISK = "+ql(compressed))
	mustRun(t, dst.db, "RESTORE FILELISTONLY FROM DISK = "+ql(compressed))

	ctx := testCtx(t)
	conn, err := dst.db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	r, err := run(ctx, conn, nil, restoreAs("Sales_verify", compressed))
	if err != nil {
		t.Fatal(err)
	}
	if got := r.errNums(); len(got) != 2 || got[0] != 3013 || got[1] != 9004 || r.errs[1].Class != 21 {
		t.Fatalf("RESTORE of the CU16 format on CU15: errors %v (%v), want 3013 then 9004 severity 21", got, r.errs)
	}
	var one int
	if err := conn.QueryRowContext(ctx, "SELECT 1").Scan(&one); err != nil {
		t.Fatalf("the session after 9004: %v, want it open", err)
	}
	var state string
	if err := dst.db.QueryRow("SELECT state_desc FROM sys.databases WHERE name = N'Sales_verify'").Scan(&state); err != nil || state != "RESTORING" {
		t.Errorf("copy after the failed RESTORE: %q, %v; want RESTORING", state, err)
	}
	mustRun(t, dst.db, restoreAs("Sales_verify", plain))

	cu16 := src.peerOf(t, "verify02", versioned("15.0.4223.1"))
	if err := cu16.in.ImportCertificate(cert); err != nil {
		t.Fatal(err)
	}
	mustRun(t, cu16.db, restoreAs("Sales_verify", compressed))
}

// TDE and compression: a TDE database's pages compress only with an
// explicit MAXTRANSFERSIZE above 64 KiB on SQL Server 2016 and 2017; 2019
// raises it on its own.
func TestTDECompressionNeedsMaxTransferSize(t *testing.T) {
	ratio := func(e *testEnv, with string) float64 {
		t.Helper()
		h := header(t, e.db, e.backupTo(t, "Sales", "r.bak", with))
		return float64(asInt(h["CompressedBackupSize"])) / float64(asInt(h["BackupSize"]))
	}
	src2016, _ := tdeSource(t, func(c *Config) { c.MajorVersion = 13 })
	if r := ratio(src2016, ", COMPRESSION"); r < 0.9 {
		t.Errorf("2016, TDE, COMPRESSION without MAXTRANSFERSIZE: ratio %.2f, want about 1 (encrypted pages)", r)
	}
	if r := ratio(src2016, ", COMPRESSION, MAXTRANSFERSIZE = 131072"); r > 0.7 {
		t.Errorf("2016, TDE, COMPRESSION, MAXTRANSFERSIZE 128 KiB: ratio %.2f, want compressed", r)
	}
	src2019, _ := tdeSource(t, versioned("15.0.4385.2"))
	if r := ratio(src2019, ", COMPRESSION"); r > 0.7 {
		t.Errorf("2019 CU28, TDE, COMPRESSION: ratio %.2f, want compressed", r)
	}
}
