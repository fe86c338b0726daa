// Package sitetest is the emulated site the activity, crash and workflow
// tests run against: a source instance and the remote site's verification
// instance (emulated SQL Server over TDS), two backup servers SQL Server
// reaches by UNC path (directories of this machine, or Samba shares the
// worker reaches over SMB), and the configuration naming them.
package sitetest

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	_ "github.com/microsoft/go-mssqldb" // the "sqlserver" driver of ExecIn

	"github.com/backupcycle/backupcycle/internal/catalog"
	"github.com/backupcycle/backupcycle/internal/config"
	"github.com/backupcycle/backupcycle/internal/evidence"
	"github.com/backupcycle/backupcycle/internal/sambatest"
	"github.com/backupcycle/backupcycle/internal/sqlsim"
	"github.com/backupcycle/backupcycle/internal/tsql"
)

const (
	// Password is the sa password of every emulated instance.
	Password = "Pa55w0rd!x"
	// PasswordEnv is the variable the configuration reads it from.
	PasswordEnv = "BC_TEST_SQL_PASSWORD"
	// SMBPasswordEnv holds the Samba servers' password for the configuration.
	SMBPasswordEnv = "BC_TEST_SMB_PASSWORD"
	// VerifyInstance is the verification instance's name.
	VerifyInstance = "verify01"
)

// Servers are the site's backup servers, as configured and as their
// directories are keyed in Site.Dirs: each is the other's copy target.
var Servers = []string{"bak01", "bak02"}

// UNC is the path SQL Server writes a backup server's files to.
func UNC(server string) string { return `\\` + server + `\backup` }

// NICPaths are a backup server's n UNC paths, one per NIC (seed 000, "Using
// Multiple NICs"): UNC(server), then \\<server>-nic2\backup, ... All reach
// the same directory; the emulator can throttle each on its own
// (sqlsim.Instance.SetShareThrottle), as separate network cards.
func NICPaths(server string, n int) []string {
	out := []string{UNC(server)}
	for i := 2; i <= n; i++ {
		out = append(out, fmt.Sprintf(`\\%s-nic%d\backup`, server, i))
	}
	return out
}

// Options shape a site. The zero value (with a Database) is a site of
// local directories with a 4 MiB database on source instance sql01.
type Options struct {
	// Database is created on the source and is the configuration's first
	// databases: entry.
	Database string
	// Size of the database in bytes; 0 = 4 MiB.
	Size int64
	// FreeSize, Filestream and Contained shape the database (see
	// sqlsim.DatabaseSpec): allocated but unused space, a FILESTREAM
	// container, partial containment.
	FreeSize   int64
	Filestream bool
	Contained  bool
	// CommitLog gives the database the emulator's workload table
	// dbo.CommitLog (sqlsim.DatabaseSpec.CommitLog).
	CommitLog bool
	// LogicalName of its first data file; empty = the emulator's default.
	LogicalName string
	// Instance is the source's configuration name; empty = "sql01".
	// Tests sharing one Temporal server give each site its own, since a
	// cycle's workflow id is per (instance, database).
	Instance string
	// Uncompressed backs the database up without COMPRESSION.
	Uncompressed bool
	// Extra is YAML appended to the database's entry, after its sanity
	// checks (so it may add more of them as list items).
	Extra string
	// SMB puts backup servers on Samba: SQL Server's UNC path maps to the
	// share's directory, the worker reaches it over SMB. All of a site's
	// Samba servers share one password.
	SMB map[string]*sambatest.Server
	// BandwidthLimit sets backup_servers[].bandwidth_limit, e.g.
	// {"bak02": "2MiB"}.
	BandwidthLimit map[string]string
	// NICs gives every backup server that many UNC paths (NICPaths);
	// 0 or 1 is one.
	NICs int
	// NoSQL writes the directories and the configuration but starts no
	// instance and creates no database: for activities that only touch
	// the backup servers.
	NoSQL bool
	// SourceConfig and VerifyConfig change the emulator configuration of
	// the source and of the verification instance (a version, an edition).
	SourceConfig, VerifyConfig func(*sqlsim.Config)
	// Collation is both instances' server collation (sqlsim.Config);
	// empty: the emulator's default, case-insensitive.
	Collation string
	// ManifestKeys configures manifest keys (manifest_keys): their ids,
	// the first signing, each key a random one in a file under Root
	// (Site.KeyFile). None: manifests are neither signed nor
	// authenticated.
	ManifestKeys []string
	// Evidence keeps an evidence ledger: a new signing key in a file
	// under Root (Site.EvidenceKeyFile) and its public key.
	Evidence bool
}

// Site is a running emulated site.
type Site struct {
	t testing.TB
	// Root holds everything: Dirs, the configuration file.
	Root string
	// Dirs are the directories by role: bak01 and bak02 (each backup
	// server's files), restore (with data/ and log/, where the verification
	// instance restores), src and verify (the instances' own data).
	Dirs map[string]string
	// Source and Verify are nil with NoSQL.
	Source, Verify *sqlsim.Instance
	nics           int    // Options.NICs
	collation      string // Options.Collation
	// Instance and Database are the configuration's names of the source
	// and of the database.
	Instance, Database string
	ConfigPath         string
	Config             *config.Config
}

// MakeDirs creates a site's backup server and restore directories under
// root and returns the shares a source instance sees (each backup server's
// UNC path) and those the verification instance sees (also D:\restore).
func MakeDirs(t testing.TB, root string) (dirs, sourceShares, verifyShares map[string]string) {
	t.Helper()
	dirs = map[string]string{"restore": filepath.Join(root, "restore")}
	for _, s := range Servers {
		dirs[s] = filepath.Join(root, s)
	}
	for _, d := range []string{dirs["bak01"], dirs["bak02"], filepath.Join(dirs["restore"], "data"), filepath.Join(dirs["restore"], "log")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	sourceShares, verifyShares = map[string]string{}, map[string]string{`D:\restore`: dirs["restore"]}
	for _, s := range Servers {
		sourceShares[UNC(s)] = dirs[s]
		verifyShares[UNC(s)] = dirs[s]
	}
	return dirs, sourceShares, verifyShares
}

// StartInstance starts an emulated instance named name (its @@SERVERNAME)
// with its data in dataDir, sa's password Password and shares (UNC or
// drive path -> directory); it stops when the test ends.
func StartInstance(t testing.TB, name, dataDir string, shares map[string]string) *sqlsim.Instance {
	t.Helper()
	return StartConfig(t, sqlsim.Config{Name: name, DataDir: dataDir, Logins: map[string]string{"sa": Password}, Shares: shares})
}

// instanceConfig is an instance's emulator configuration, changed by tweak
// (nil: none).
func instanceConfig(name, dataDir string, shares map[string]string, tweak func(*sqlsim.Config)) sqlsim.Config {
	cfg := sqlsim.Config{Name: name, DataDir: dataDir, Logins: map[string]string{"sa": Password}, Shares: shares}
	if tweak != nil {
		tweak(&cfg)
	}
	return cfg
}

// StartConfig starts an emulated instance configured by cfg; it stops
// when the test ends.
func StartConfig(t testing.TB, cfg sqlsim.Config) *sqlsim.Instance {
	t.Helper()
	if err := os.MkdirAll(cfg.DataDir, 0o755); err != nil {
		t.Fatal(err)
	}
	in, err := sqlsim.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := in.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = in.Stop() })
	return in
}

// New starts a site. The test's environment gets PasswordEnv (and
// SMBPasswordEnv) unless it holds them already: a parallel test cannot set
// variables, so its TestMain sets them once.
func New(t testing.TB, o Options) *Site {
	t.Helper()
	if o.Instance == "" {
		o.Instance = "sql01"
	}
	if o.Size == 0 {
		o.Size = 4 << 20
	}
	s := &Site{t: t, Root: t.TempDir(), Instance: o.Instance, Database: o.Database, nics: o.NICs, collation: o.Collation}
	dirs, shares, vshares := MakeDirs(t, s.Root)
	s.Dirs = dirs
	s.Dirs["src"], s.Dirs["verify"] = filepath.Join(s.Root, "src"), filepath.Join(s.Root, "verify")
	location := map[string]string{}
	smbPassword := ""
	for _, name := range Servers {
		location[name] = s.Dirs[name]
		srv, ok := o.SMB[name]
		if !ok {
			continue
		}
		if smbPassword != "" && srv.Password() != smbPassword {
			t.Fatalf("sitetest: the Samba servers of a site share one password (%s)", SMBPasswordEnv)
		}
		smbPassword = srv.Password()
		// SQL Server writes to the share's directory by its UNC path.
		s.Dirs[name] = srv.Dir("backup")
		shares[UNC(name)], vshares[UNC(name)] = s.Dirs[name], s.Dirs[name]
		location[name] = fmt.Sprintf("%s\n    smb:\n      user: %s\n      password_env: %s", srv.URL("backup"), srv.User(), SMBPasswordEnv)
	}
	if smbPassword != "" && os.Getenv(SMBPasswordEnv) != smbPassword {
		t.Setenv(SMBPasswordEnv, smbPassword)
	}
	for _, name := range Servers {
		for _, p := range NICPaths(name, o.NICs)[1:] {
			shares[p], vshares[p] = s.Dirs[name], s.Dirs[name]
		}
	}
	srcAddr, verifyAddr := "127.0.0.1:1", "127.0.0.1:2" // nothing listens there
	if !o.NoSQL {
		if os.Getenv(PasswordEnv) != Password {
			t.Setenv(PasswordEnv, Password)
		}
		s.Source = StartConfig(t, instanceConfig("sql01", s.Dirs["src"], shares, o.collated(o.SourceConfig)))
		s.Verify = StartConfig(t, instanceConfig(VerifyInstance, s.Dirs["verify"], vshares, o.collated(o.VerifyConfig)))
		if err := s.Source.CreateDatabase(sqlsim.DatabaseSpec{Name: o.Database, Size: o.Size, DataFiles: 2, LogicalName: o.LogicalName,
			FreeSize: o.FreeSize, Filestream: o.Filestream, Contained: o.Contained, CommitLog: o.CommitLog}); err != nil {
			t.Fatal(err)
		}
		srcAddr, verifyAddr = s.Source.Addr(), s.Verify.Addr()
	}

	var y strings.Builder
	if len(o.ManifestKeys) > 0 {
		y.WriteString("manifest_keys:\n")
		for _, id := range o.ManifestKeys {
			fmt.Fprintf(&y, "  - id: %s\n    key_file: '%s'\n", id, s.writeKey(id))
		}
	}
	if o.Evidence {
		fmt.Fprintf(&y, "evidence:\n  signing_key_file: '%s'\n  public_keys: ['%s']\n", s.EvidenceKeyFile(), s.writeEvidenceKey())
	}
	y.WriteString("sql_instances:\n")
	for _, in := range [][2]string{{o.Instance, srcAddr}, {VerifyInstance, verifyAddr}} {
		fmt.Fprintf(&y, "  - name: %s\n    address: %s\n    user: sa\n    password_env: %s\n    encrypt: disable\n", in[0], in[1], PasswordEnv)
	}
	y.WriteString("backup_servers:\n")
	for _, name := range Servers {
		fmt.Fprintf(&y, `  - name: %s
    unc_paths: ['%s']
    location: %s
    verify_instance: %s
    restore_data_dir: 'D:\restore\data'
    restore_log_dir: 'D:\restore\log'
`, name, strings.Join(NICPaths(name, o.NICs), "', '"), location[name], VerifyInstance)
		if l := o.BandwidthLimit[name]; l != "" {
			fmt.Fprintf(&y, "    bandwidth_limit: %s\n", l)
		}
	}
	stripes := 2 // spread evenly over the NIC paths
	if o.NICs > 2 {
		stripes = o.NICs
	}
	fmt.Fprintf(&y, "databases:\n  - name: %q\n    instance: %s\n    backup_servers: [bak01, bak02]\n    stripes: %d\n", o.Database, o.Instance, stripes)
	if o.Uncompressed {
		y.WriteString("    compression: false\n")
	}
	y.WriteString(`    sanity_checks:
      - name: orders-present
        query: SELECT COUNT_BIG(*) FROM dbo.Orders
        at_least: 1
`)
	y.WriteString(o.Extra)
	s.ConfigPath = filepath.Join(s.Root, "backupcycle.yaml")
	s.write(y.String())
	return s
}

// KeyFile is the file holding manifest key id (Options.ManifestKeys).
func (s *Site) KeyFile(id string) string { return filepath.Join(s.Root, "manifest-key-"+id) }

// writeKey writes a random manifest key id into KeyFile(id) and returns
// the file.
func (s *Site) writeKey(id string) string {
	s.t.Helper()
	var raw [32]byte
	if _, err := rand.Read(raw[:]); err != nil {
		s.t.Fatal(err)
	}
	f := s.KeyFile(id)
	if err := os.WriteFile(f, []byte(hex.EncodeToString(raw[:])+"\n"), 0o600); err != nil {
		s.t.Fatal(err)
	}
	return f
}

// EvidenceKeyFile is the file holding the evidence signing key
// (Options.Evidence).
func (s *Site) EvidenceKeyFile() string { return filepath.Join(s.Root, "evidence-key") }

// writeEvidenceKey writes a new evidence signing key into EvidenceKeyFile
// and returns its public key.
func (s *Site) writeEvidenceKey() string {
	s.t.Helper()
	key, enc, err := evidence.GenerateKey()
	if err != nil {
		s.t.Fatal(err)
	}
	if err := os.WriteFile(s.EvidenceKeyFile(), []byte(enc+"\n"), 0o600); err != nil {
		s.t.Fatal(err)
	}
	return key.Public().String()
}

// write replaces the configuration file with y and loads it.
func (s *Site) write(y string) {
	s.t.Helper()
	if err := os.WriteFile(s.ConfigPath, []byte(y), 0o600); err != nil {
		s.t.Fatal(err)
	}
	cfg, err := config.Load(s.ConfigPath)
	if err != nil {
		s.t.Fatalf("site configuration: %v", err)
	}
	s.Config = cfg
}

// Reconfigure rewrites the configuration file with edit and loads it into
// Config.
func (s *Site) Reconfigure(edit func(yaml string) string) {
	s.t.Helper()
	data, err := os.ReadFile(s.ConfigPath)
	if err != nil {
		s.t.Fatal(err)
	}
	s.write(edit(string(data)))
}

// WithServer adds backup server name (its files in dir, verified on the
// site's verification instance) to a site's configuration without putting
// it in any database's rotation: a server the configuration knows, but not
// one of the database's.
func WithServer(name, dir string) func(string) string {
	return func(y string) string {
		block := "  - name: " + name + "\n    unc_paths: ['" + UNC(name) + "']\n    location: " + dir +
			"\n    verify_instance: " + VerifyInstance + "\n    restore_data_dir: 'D:\\restore\\data'\n    restore_log_dir: 'D:\\restore\\log'\n"
		return strings.Replace(y, "databases:\n", block+"databases:\n", 1)
	}
}

// AddSource starts a second source instance, name, with database db of
// size bytes, and adds the instance and entry (a complete databases: item,
// indented like the first) to the configuration.
func (s *Site) AddSource(name, db string, size int64, entry string) *sqlsim.Instance {
	s.t.Helper()
	s.Dirs[name] = filepath.Join(s.Root, name)
	shares := map[string]string{}
	for _, srv := range Servers {
		shares[UNC(srv)] = s.Dirs[srv]
	}
	in := StartInstance(s.t, name, s.Dirs[name], shares)
	if err := in.CreateDatabase(sqlsim.DatabaseSpec{Name: db, Size: size, DataFiles: 2}); err != nil {
		s.t.Fatal(err)
	}
	inst := fmt.Sprintf("  - name: %s\n    address: %s\n    user: sa\n    password_env: %s\n    encrypt: disable\n",
		name, in.Addr(), PasswordEnv)
	verify := "  - name: " + VerifyInstance + "\n"
	s.Reconfigure(func(y string) string {
		if !strings.Contains(y, verify) {
			s.t.Fatalf("site configuration has no %s entry to insert %s before", VerifyInstance, name)
		}
		y = strings.Replace(y, verify, inst+verify, 1)
		if !strings.HasSuffix(y, "\n") {
			y += "\n"
		}
		return y + entry
	})
	return in
}

// RestartSource stops the source and starts it again on the same data (its
// databases survive) with its emulator configuration changed by tweak (an
// edition, a time zone); Source and the configured address follow.
func (s *Site) RestartSource(tweak func(*sqlsim.Config)) *sqlsim.Instance {
	s.t.Helper()
	shares := map[string]string{}
	for _, srv := range Servers {
		shares[UNC(srv)] = s.Dirs[srv]
	}
	s.Source = s.restart(s.Source, s.Instance, instanceConfig("sql01", s.Dirs["src"], shares, tweak))
	return s.Source
}

// RestartVerify stops the verification instance and starts it again on the
// same data (restored copies, certificates and msdb history survive) with
// its emulator configuration changed by tweak (an upgrade to another
// version, an edition, a platform, its configuration options); tweak sees
// the shares in Config.Shares (each backup server's NIC paths and
// D:\restore). Verify and the configured address follow.
func (s *Site) RestartVerify(tweak func(*sqlsim.Config)) *sqlsim.Instance {
	s.t.Helper()
	vshares := map[string]string{`D:\restore`: s.Dirs["restore"]}
	for _, srv := range Servers {
		for _, p := range NICPaths(srv, s.nics) {
			vshares[p] = s.Dirs[srv]
		}
	}
	s.Verify = s.restart(s.Verify, VerifyInstance, instanceConfig(VerifyInstance, s.Dirs["verify"], vshares, tweak))
	return s.Verify
}

// restart stops in and starts it again as cfg, on the address it had (so
// workers holding the configuration still reach it); the configured address
// of instance follows all the same.
func (s *Site) restart(in *sqlsim.Instance, instance string, cfg sqlsim.Config) *sqlsim.Instance {
	s.t.Helper()
	addr := in.Addr()
	if err := in.Stop(); err != nil {
		s.t.Fatal(err)
	}
	cfg.ListenAddr = addr
	if cfg.Collation == "" {
		cfg.Collation = s.collation // the site's, unless tweak chose another
	}
	started := StartConfig(s.t, cfg)
	inst, ok := s.Config.SQLInstance(instance)
	if !ok {
		s.t.Fatalf("site configuration has no instance %s", instance)
	}
	inst.Address = started.Addr()
	return started
}

// Manifest loads the manifest of set seq of the site's instance's database
// db from a backup server's directory; nil when there is none.
func (s *Site) Manifest(server, db string, seq int64) *catalog.Manifest {
	s.t.Helper()
	name := filepath.Join(s.Dirs[server], tsql.ManifestFileName(s.Instance, db, seq))
	data, err := os.ReadFile(name)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		s.t.Fatal(err)
	}
	m, err := catalog.Decode(data)
	if err != nil {
		s.t.Fatalf("manifest %s: %v", name, err)
	}
	return m
}

// ExecIn runs stmt as sa in database db of an instance (CREATE FUNCTION,
// for one, must be alone in its batch and run in its database).
func ExecIn(t testing.TB, in *sqlsim.Instance, db, stmt string) {
	t.Helper()
	conn, err := sql.Open("sqlserver", in.DSN("sa", Password, db))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := conn.ExecContext(ctx, stmt); err != nil {
		t.Fatalf("%s in %s: %v", stmt, db, err)
	}
}

// Statements are what an instance ran of one kind ("BACKUP DATABASE", ...).
func Statements(in *sqlsim.Instance, kind string) []sqlsim.StatementRecord {
	var out []sqlsim.StatementRecord
	for _, st := range in.Statements() {
		if st.Kind == kind {
			out = append(out, st)
		}
	}
	return out
}

// collated is tweak preceded by the site's collation (Options.Collation).
func (o Options) collated(tweak func(*sqlsim.Config)) func(*sqlsim.Config) {
	return func(c *sqlsim.Config) {
		c.Collation = o.Collation
		if tweak != nil {
			tweak(c)
		}
	}
}
