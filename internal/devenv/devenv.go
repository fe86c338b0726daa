// Package devenv is the emulated site behind `make demo` (the devworker command):
// a source SQL Server (sql01) holding the database Sales, a verification
// instance at the remote site (sqlverify), and two backup servers (bak01,
// bak02) as local directories that the emulated SQL Servers reach through
// UNC paths, two per server (one per NIC, as in seed 000). Start writes the
// configuration of that site to <state>/config.dev.yaml and returns it, so
// the worker runs the real activities against it.
//
// Everything lives under the state directory and persists: a second Start
// finds the database (and its DBBackup.Sequence table), the backup sets and
// their manifests where the first left them, so sequence numbers and the
// round robin go on. Only the listen ports change: the emulators take free
// ports, and the configuration is rewritten on every Start.
//
// When Samba is installed (smbd, smbpasswd, nss_wrapper), each backup server
// is also served by its own private smbd (internal/sambatest) on a free
// 127.0.0.1 port, sharing that same directory: the emulators write by UNC
// path, the worker reads and copies over real SMB (smb:// locations, the
// password in <state>/secrets by reference). Run by a normal user, smbd runs
// as that user (under uid_wrapper) and serves the directories where they
// are, from any clone directory; run by root, see Options.ShareRoot.
// Only without Samba does the worker reach the directories as file://
// locations.
//
// Options.ObjectStore adds an object store with Object Lock, vault01: a
// versitygw (internal/s3test) on a free 127.0.0.1 port keeping its bucket
// under the state directory, configured as Sales's immutable_copy.
//
// Options.FleetDatabases (devworker --dev-fleet) adds a few small databases on
// sql01, selected with USER_DATABASES, so the Fleet workflow has a fleet to
// run; without it the configuration names Sales only.
package devenv

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"go.uber.org/zap"

	"github.com/backupcycle/backupcycle/internal/config"
	"github.com/backupcycle/backupcycle/internal/evidence"
	"github.com/backupcycle/backupcycle/internal/mssql"
	"github.com/backupcycle/backupcycle/internal/s3test"
	"github.com/backupcycle/backupcycle/internal/sambatest"
	"github.com/backupcycle/backupcycle/internal/sqlsim"
	"github.com/backupcycle/backupcycle/internal/tsql"
)

// Names of the emulated site, as the generated configuration uses them.
const (
	SourceInstance = "sql01"
	VerifyInstance = "sqlverify"
	Database       = "Sales"
	ConfigFile     = "config.dev.yaml"
	// DefaultDatabaseSize is the size of Sales' data files when Options
	// leaves it at zero: big enough that the steps take measurable time.
	DefaultDatabaseSize = 320 << 20
	// MinDatabaseSize keeps the tables' extents meaningful.
	MinDatabaseSize = 4 << 20
	// RegionRows is the row count of the reference table dbo.Regions that
	// the `equals` sanity check expects.
	RegionRows = 5
	// CommitRate is how many rows a second the emulator commits into
	// Sales's dbo.CommitLog(id, committed_at) while the site runs: the
	// transactions its log backups hold, which a point-in-time restore is
	// compared with row by row.
	CommitRate = 2
)

// BackupServers are the rotation, in order.
var BackupServers = []string{"bak01", "bak02"}

// The object store of Options.ObjectStore: its name in the configuration,
// its bucket (with Object Lock) and the prefix of Sales's objects.
const (
	ObjectStore       = "vault01"
	ObjectStoreBucket = "sales-worm"
	ObjectStorePrefix = "backupcycle/"
	// objectStoreRoot is the server's root user, which creates the bucket
	// and its policy; objectStoreUser is the worker's, which may do on the
	// bucket what README "Immutable copies on object storage" allows and
	// no more (s3test.WorkerPolicy).
	objectStoreRoot = "backupcycle"
	objectStoreUser = "backupcycle-worker"
)

// The logins of both emulated instances. ProductLogin is the one the
// configuration gives the worker: it holds exactly the grants README
// "Permissions" lists (productLogins), no more. AdminLogin (sysadmin)
// prepares the site: the database's tables, the sequence tables. Their
// passwords are generated on the first start and kept in files under the
// state directory, secrets/sql.password and secrets/sa.password (the
// configuration names the file, never the password).
const (
	ProductLogin = "backupcycle"
	AdminLogin   = "sa"
)

// SambaMode says whether the backup servers are served over Samba.
type SambaMode string

const (
	// SambaAuto serves them over Samba when it is installed and works, and
	// falls back to local directories (saying why) otherwise.
	SambaAuto SambaMode = ""
	// SambaOff keeps them local directories.
	SambaOff SambaMode = "off"
	// SambaRequired fails Start when Samba cannot serve them.
	SambaRequired SambaMode = "required"
)

// smbUser is the share user of every backup server's smbd.
const smbUser = "bakuser"

// Options configure Start.
type Options struct {
	// StateDir holds everything (required); created if missing.
	StateDir string
	// DatabaseSize is the total size of Sales' data files, used only when
	// the database is created (the first Start on a state directory).
	// Default DefaultDatabaseSize.
	DatabaseSize int64
	// IP the emulators listen on; default 127.0.0.1.
	IP string
	// TemporalAddress and Namespace go into the configuration's temporal:
	// section, so `worker --config <state>/config.dev.yaml` or a starter
	// reaches the same server. Empty: the built-in defaults.
	TemporalAddress string
	Namespace       string
	Logger          *zap.Logger
	// Samba: see SambaMode; default SambaAuto.
	Samba SambaMode
	// FleetDatabases is how many small databases sql01 holds besides Sales
	// (FleetDatabaseNames, in that order; created when missing and kept on
	// later starts). When it is above zero the configuration selects
	// sql01's databases with USER_DATABASES, so the Fleet workflow runs all
	// of them. Zero: the configuration names Sales only, as `make demo`
	// wants it.
	FleetDatabases int
	// LogBackups gives Sales log backups (log_backup every minute,
	// owns_backup_chain) with a standby proof (log_proof: standby): the
	// worker of such a site runs its log chain.
	LogBackups bool
	// ObjectStore serves vault01, an S3 bucket with Object Lock
	// (versitygw), and makes it Sales's immutable_copy.
	ObjectStore bool
	// Drill gives Sales drill: (a drill a day, to a random point of the
	// last hour of the proven window, on sqlverify) and rto: 1h. It needs
	// LogBackups: the point is one of the log chain's.
	Drill bool
	// TaskQueues gives backup servers a task_queue of their own (server
	// name -> queue): their copies are then run by a worker polling that
	// queue, as next to a real backup server (`make stack` runs one).
	TaskQueues map[string]string
	// ShareRoot is where the backup servers' shares are kept when smbd,
	// run by root, gives file access to a share user of its own (uid 4450)
	// that cannot reach the state directory (a clone in a home directory
	// of mode 0700 or 0750, a mktemp -d directory): the share of
	// each server lives in <ShareRoot>/<hash of the state directory>/<server>
	// and <state>/<server>/backup links to it. Default DefaultShareRoot.
	ShareRoot string
}

// DefaultShareRoot is Options.ShareRoot's default: searchable by every
// user (like /tmp) and kept across reboots, so the demo's sets outlive them
// as the state directory does.
const DefaultShareRoot = "/var/tmp/backupcycle-shares"

// FleetDatabaseNames are the small databases of Options.FleetDatabases.
var FleetDatabaseNames = []string{"Inventory", "Payroll", "CRM", "Billing", "Support", "Web",
	"Reporting", "HR", "Shipping", "Audit", "Catalog", "Marketing"}

// fleetDatabaseSize is the size of the i-th fleet database: 1 to 2.5 MiB, so
// that the fleet's largest-first order shows, and small enough that a dozen
// of them cost the dev site a second or two.
func fleetDatabaseSize(i int) int64 { return 1<<20 + int64(3-i%4)*512<<10 }

// Site is the running emulated site.
type Site struct {
	// Config is the generated configuration, loaded back with config.Load.
	Config *config.Config
	// ConfigFile is where it was written.
	ConfigFile string
	// Source and Verify are the emulated SQL Server instances.
	Source, Verify *sqlsim.Instance
	// BackupDirs maps a backup server name to its local directory.
	BackupDirs map[string]string
	// Locations maps a backup server name to the location the worker uses:
	// smb://127.0.0.1:PORT/backup over Samba, else the local directory.
	Locations map[string]string
	// SMB holds the running smbd per backup server (empty without Samba).
	SMB map[string]*sambatest.Server
	// SambaNote says why the backup servers are local directories (empty
	// when they are served over Samba).
	SambaNote string
	// SMBNote says as whom smbd runs and accesses the shares (empty
	// without Samba).
	SMBNote string
	// ShareNote says where the shares live when not under the state
	// directory, and why (empty when they are there).
	ShareNote string
	// UNCPaths maps a backup server name to the paths SQL Server writes to.
	UNCPaths map[string][]string
	// Created is true when this Start created Sales (a fresh state
	// directory); false when it continued an existing one.
	Created bool
	// CreateTime is how long creating Sales took (zero when continued).
	CreateTime time.Duration
	// FleetDatabases are the small databases on sql01 that the
	// configuration's selection picks besides Sales (Options.FleetDatabases).
	FleetDatabases []string
	// Vault is the object store of Options.ObjectStore (nil without).
	Vault *s3test.Server

	lock          *os.File // flock on <state>/site.lock while the site runs
	adminPassword string
}

// layout is where things live under the state directory.
type layout struct {
	root, secrets, password string
	adminPassword           string
	manifestKey             string // the workers' manifest key (manifest_keys)
	evidenceKey             string // the workers' evidence signing key (evidence:)
	srcData, verifyData     string
	volumes                 []string // the source's two data volumes
	restore                 string   // the verify instance's restore volume
	bak                     map[string]string
	smbDir, smbPassword     map[string]string // per backup server
	vault, vaultSecret      string            // the object store's state and its root user's secret
	vaultWorkerSecret       string            // the secret of the worker's user there
}

func newLayout(root string) layout {
	l := layout{root: root, secrets: filepath.Join(root, "secrets"), bak: map[string]string{},
		smbDir: map[string]string{}, smbPassword: map[string]string{}}
	l.password = filepath.Join(l.secrets, "sql.password")
	l.adminPassword = filepath.Join(l.secrets, "sa.password")
	l.manifestKey = filepath.Join(l.secrets, "manifest.key")
	l.evidenceKey = filepath.Join(l.secrets, "evidence.key")
	l.srcData = filepath.Join(root, SourceInstance)
	l.verifyData = filepath.Join(root, VerifyInstance)
	// Two "volumes" of the source host, like D: and E: on a real one.
	l.volumes = []string{filepath.Join(l.srcData, "volume-d"), filepath.Join(l.srcData, "volume-e")}
	l.restore = filepath.Join(l.verifyData, "restore")
	l.vault = filepath.Join(root, ObjectStore)
	l.vaultSecret = filepath.Join(l.secrets, ObjectStore+".secret")
	l.vaultWorkerSecret = filepath.Join(l.secrets, ObjectStore+".worker.secret")
	for _, b := range BackupServers {
		// The share serves this same directory: a state directory made
		// without Samba keeps its sets when Samba appears, and vice versa.
		l.bak[b] = filepath.Join(root, b, "backup")
		l.smbDir[b] = filepath.Join(root, "samba-"+b)
		l.smbPassword[b] = filepath.Join(l.secrets, "smb-"+b+".password")
	}
	return l
}

// uncPaths are the two NIC paths of a backup server as SQL Server sees them.
func uncPaths(server string) []string {
	return []string{`\\` + server + `-nic1\backup`, `\\` + server + `-nic2\backup`}
}

// restorePrefix is the verify instance's restore volume as it sees it.
const restorePrefix = `R:\restore`

// Start brings the site up: directories, the two emulators (on free ports),
// Sales on first use, the configuration file. Stop ends it.
func Start(ctx context.Context, o Options) (site *Site, err error) {
	if o.StateDir == "" {
		return nil, errors.New("devenv: Options.StateDir is empty: give the directory that holds the emulated site (e.g. .demo)")
	}
	if o.DatabaseSize == 0 {
		o.DatabaseSize = DefaultDatabaseSize
	}
	if o.DatabaseSize < MinDatabaseSize {
		return nil, fmt.Errorf("devenv: database size %d bytes is too small: use at least %d MiB", o.DatabaseSize, MinDatabaseSize>>20)
	}
	if o.FleetDatabases < 0 || o.FleetDatabases > len(FleetDatabaseNames) {
		return nil, fmt.Errorf("devenv: %d fleet databases: use 0 to %d", o.FleetDatabases, len(FleetDatabaseNames))
	}
	if o.Drill && !o.LogBackups {
		return nil, errors.New("devenv: Options.Drill without LogBackups: the drill's point is one of the log chain's proven window")
	}
	for b := range o.TaskQueues {
		if !slices.Contains(BackupServers, b) {
			return nil, fmt.Errorf("devenv: Options.TaskQueues names %q: the backup servers are %s", b, strings.Join(BackupServers, ", "))
		}
	}
	if o.IP == "" {
		o.IP = "127.0.0.1"
	}
	if o.Logger == nil {
		o.Logger = zap.NewNop()
	}
	root, err := filepath.Abs(o.StateDir)
	if err != nil {
		return nil, fmt.Errorf("devenv: state directory %s: %w", o.StateDir, err)
	}
	l := newLayout(root)
	dirs := append([]string{l.secrets, l.srcData, l.verifyData, filepath.Join(l.restore, "data"), filepath.Join(l.restore, "log")}, l.volumes...)
	for _, b := range BackupServers {
		dirs = append(dirs, l.bak[b])
	}
	for _, d := range dirs {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, fmt.Errorf("devenv: create %s: %w (choose another state directory)", d, err)
		}
	}
	s := &Site{BackupDirs: map[string]string{}, UNCPaths: map[string][]string{},
		Locations: map[string]string{}, SMB: map[string]*sambatest.Server{}}
	if s.lock, err = lockState(root); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			_ = s.Stop()
		}
	}()
	password, err := ensurePassword(l.password)
	if err != nil {
		return nil, err
	}
	adminPassword, err := ensurePassword(l.adminPassword)
	if err != nil {
		return nil, err
	}
	// The demo signs its manifests, as a production site should; the key
	// is kept, so sets of earlier runs stay authenticated.
	if _, err := ensureSecret(l.manifestKey, "", 32); err != nil {
		return nil, err
	}
	// And records every proof in the evidence ledger, with a key kept
	// likewise.
	evidencePublic, err := ensureEvidenceKey(l.evidenceKey)
	if err != nil {
		return nil, err
	}

	if err := s.serveSamba(l, o); err != nil {
		return nil, err
	}
	if o.ObjectStore {
		if err := s.serveObjectStore(ctx, l); err != nil {
			return nil, err
		}
	}

	shares := map[string]string{}
	for _, b := range BackupServers {
		s.BackupDirs[b] = l.bak[b]
		if srv := s.SMB[b]; srv != nil {
			s.Locations[b] = srv.URL("backup")
		} else {
			s.Locations[b] = l.bak[b]
		}
		s.UNCPaths[b] = uncPaths(b)
		for _, p := range s.UNCPaths[b] {
			shares[p] = l.bak[b]
		}
	}
	s.adminPassword = adminPassword
	logins := map[string]string{AdminLogin: adminPassword}
	fleet := FleetDatabaseNames[:o.FleetDatabases]
	srcLogin, verifyLogin := productLogins(password, append([]string{Database}, fleet...))
	s.Source, err = sqlsim.New(sqlsim.Config{Name: SourceInstance, ListenAddr: o.IP + ":0", DataDir: l.srcData,
		Logins: logins, Principals: []sqlsim.Login{srcLogin}, Shares: shares, Logger: o.Logger})
	if err != nil {
		return nil, fmt.Errorf("devenv: %w", err)
	}
	// The verification instance restores from the remote copies, so it
	// reaches the backup shares too, and has its own restore volume.
	vshares := map[string]string{restorePrefix: l.restore}
	for k, v := range shares {
		vshares[k] = v
	}
	s.Verify, err = sqlsim.New(sqlsim.Config{Name: VerifyInstance, ListenAddr: o.IP + ":0", DataDir: l.verifyData,
		Logins: logins, Principals: []sqlsim.Login{verifyLogin}, Shares: vshares, Logger: o.Logger})
	if err != nil {
		return nil, fmt.Errorf("devenv: %w", err)
	}
	if err := s.Source.Start(); err != nil {
		return nil, fmt.Errorf("devenv: start %s: %w", SourceInstance, err)
	}
	if err := s.Verify.Start(); err != nil {
		return nil, fmt.Errorf("devenv: start %s: %w", VerifyInstance, err)
	}

	if files, ferr := s.Source.DatabaseFiles(Database); ferr == nil {
		// The emulator's catalog records absolute paths: a state directory
		// that was moved or partly deleted cannot be continued.
		for _, f := range files {
			if _, err := os.Stat(f); err != nil || !strings.HasPrefix(f, l.srcData+string(filepath.Separator)) {
				return nil, fmt.Errorf("devenv: %s's file %s is missing or outside %s (was the state directory moved or partly deleted?): remove %s to start over",
					Database, f, l.srcData, o.StateDir)
			}
		}
	} else {
		began := time.Now()
		spec := salesSpec(o.DatabaseSize, l.volumes)
		if err := s.Source.CreateDatabase(spec); err != nil {
			return nil, fmt.Errorf("devenv: create %s on %s: %w", Database, SourceInstance, err)
		}
		s.Created, s.CreateTime = true, time.Since(began)
	}
	for i, name := range fleet {
		if _, err := s.Source.DatabaseFiles(name); err == nil {
			continue
		}
		if err := s.Source.CreateDatabase(sqlsim.DatabaseSpec{Name: name, Size: fleetDatabaseSize(i)}); err != nil {
			return nil, fmt.Errorf("devenv: create the fleet database %s on %s: %w", name, SourceInstance, err)
		}
	}
	s.FleetDatabases = fleet

	orders, err := s.prepare(ctx, adminPassword)
	if err != nil {
		return nil, err
	}
	s.ConfigFile = filepath.Join(root, ConfigFile)
	values := configValues{
		temporal: o.TemporalAddress, namespace: o.Namespace,
		source: s.Source.Addr(), verify: s.Verify.Addr(), passwordFile: l.password, manifestKeyFile: l.manifestKey,
		evidenceKeyFile: l.evidenceKey, evidencePublic: evidencePublic,
		uncs: s.UNCPaths, locations: s.Locations, smbPasswords: s.smbPasswordFiles(l), orders: orders,
		fleet: len(s.FleetDatabases) > 0, logs: o.LogBackups, drill: o.Drill, taskQueues: o.TaskQueues,
	}
	if s.Vault != nil {
		values.vaultEndpoint, values.vaultSecret = s.Vault.Endpoint, l.vaultWorkerSecret
	}
	text := configText(values)
	if err := writeFileAtomic(s.ConfigFile, []byte(text), 0o644); err != nil {
		return nil, fmt.Errorf("devenv: write %s: %w", s.ConfigFile, err)
	}
	s.Config, err = config.Load(s.ConfigFile)
	if err != nil {
		return nil, fmt.Errorf("devenv: the generated configuration does not load (a bug in devenv): %w", err)
	}
	return s, nil
}

// serveObjectStore starts vault01 on the site's object store directory and
// makes sure its bucket exists with Object Lock, with the worker's user
// and the bucket policy that limits it.
func (s *Site) serveObjectStore(ctx context.Context, l layout) error {
	secret, err := ensureSecret(l.vaultSecret, "", 20)
	if err != nil {
		return err
	}
	workerSecret, err := ensureSecret(l.vaultWorkerSecret, "", 20)
	if err != nil {
		return err
	}
	s.Vault, err = s3test.RunAs(l.vault, objectStoreRoot, secret)
	if err != nil {
		return fmt.Errorf("devenv: the object store %s: %w", ObjectStore, err)
	}
	if err := s.Vault.WorkerBucket(ctx, ObjectStoreBucket, objectStoreUser, workerSecret); err != nil {
		return fmt.Errorf("devenv: the object store %s: %w", ObjectStore, err)
	}
	return nil
}

// smbPasswordFiles names the password file of each Samba-served server.
func (s *Site) smbPasswordFiles(l layout) map[string]string {
	m := map[string]string{}
	for b := range s.SMB {
		m[b] = l.smbPassword[b]
	}
	return m
}

// BackupMode is one line for the demo output: how the worker reaches each
// backup server (over SMB, or as a local directory) and why.
func (s *Site) BackupMode() string {
	var parts []string
	for _, b := range BackupServers {
		if s.SMB[b] != nil {
			parts = append(parts, b+" over SMB at "+s.Locations[b])
		} else {
			parts = append(parts, b+" as the local directory "+s.Locations[b])
		}
	}
	if len(s.SMB) == 0 {
		return "backup servers: " + strings.Join(parts, ", ") + " (local directories, not SMB: " + s.SambaNote + ")"
	}
	where := s.ShareNote
	if where == "" {
		where = "shares in the state directory"
	}
	return "backup servers: " + strings.Join(parts, ", ") + " (a private Samba smbd per server: " + s.SMBNote +
		", password in secrets/; " + where + ")"
}

// Stop stops both emulators and the smbd of each backup server; the state
// stays on disk for the next Start.
func (s *Site) Stop() error {
	var errs []error
	for _, in := range []*sqlsim.Instance{s.Verify, s.Source} {
		if in != nil {
			errs = append(errs, in.Stop())
		}
	}
	if s.SMB != nil {
		errs = append(errs, s.stopSamba())
	}
	if s.Vault != nil {
		s.Vault.Close()
		s.Vault = nil
	}
	if s.lock != nil {
		errs = append(errs, s.lock.Close()) // releases the flock
		s.lock = nil
	}
	return errors.Join(errs...)
}

// lockState takes an exclusive lock on the state directory: two emulators
// serving the same database files would corrupt them.
func lockState(root string) (*os.File, error) {
	path := filepath.Join(root, "site.lock")
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("devenv: lock %s: %w", path, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil, fmt.Errorf("devenv: state directory %s is in use by another devworker (%s is locked): stop it, or use another --state-dir", root, path)
	}
	return f, nil
}

// EnsureSecret returns the secret kept in path, generating it on first use
// (prefix and n random bytes in hex, in a file of mode 0600).
func EnsureSecret(path, prefix string, n int) (string, error) { return ensureSecret(path, prefix, n) }

// ensurePassword returns the site's SQL password, generating it on first use.
func ensurePassword(path string) (string, error) { return ensureSecret(path, "Dev-", 12) }

// ensureSecret returns the secret kept in path, generating it on first use:
// prefix and n random bytes in hex.
func ensureSecret(path, prefix string, n int) (string, error) {
	if b, err := os.ReadFile(path); err == nil {
		if pw := strings.TrimSpace(string(b)); pw != "" {
			return pw, nil
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("devenv: read %s: %w (remove it to get a new one)", path, err)
	}
	raw := make([]byte, n)
	if _, err := rand.Read(raw); err != nil {
		return "", fmt.Errorf("devenv: generate a secret: %w", err)
	}
	pw := prefix + hex.EncodeToString(raw)
	if err := writeFileAtomic(path, []byte(pw+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("devenv: write %s: %w", path, err)
	}
	return pw, nil
}

// ensureEvidenceKey reads the evidence signing key at path, or writes a
// new one there, and returns its public key.
func ensureEvidenceKey(path string) (string, error) {
	if b, err := os.ReadFile(path); err == nil {
		k, err := evidence.ParsePrivateKey(string(b))
		if err != nil {
			return "", fmt.Errorf("devenv: %s: %w (remove it to get a new one)", path, err)
		}
		return k.Public().String(), nil
	} else if !errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("devenv: read %s: %w (remove it to get a new one)", path, err)
	}
	k, enc, err := evidence.GenerateKey()
	if err != nil {
		return "", fmt.Errorf("devenv: generate the evidence key: %w", err)
	}
	if err := writeFileAtomic(path, []byte(enc+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("devenv: write %s: %w", path, err)
	}
	return k.Public().String(), nil
}

func writeFileAtomic(path string, data []byte, perm os.FileMode) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, perm); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// ordersRows is the row count of dbo.Orders for a database size: about 30
// rows per 8 KiB page, four fifths of them orders (the emulator's ratio).
func ordersRows(size int64) int64 { return size / sqlsim.PageSize * 30 * 3 / 5 }

// salesSpec is the source database: four data files over two volumes
// (the log on the second), three generated tables that sanity checks count.
func salesSpec(size int64, volumes []string) sqlsim.DatabaseSpec {
	asOf := time.Now().UTC()
	orders := ordersRows(size)
	return sqlsim.DatabaseSpec{
		Name: Database, Size: size, DataFiles: 4, Volumes: volumes, LogicalName: Database,
		Tables: []sqlsim.TableSpec{
			{Name: "Orders", Rows: orders, IDColumn: "OrderID", DateColumn: "OrderDate", MaxDate: asOf},
			{Name: "OrderLines", Rows: orders * 3 / 2, IDColumn: "OrderLineID"},
			{Name: "Customers", Rows: orders / 8, IDColumn: "CustomerID", DateColumn: "CreatedAt", MaxDate: asOf.Add(-24 * time.Hour)},
		},
		AsOf: asOf, CommitRate: CommitRate,
	}
}

// AdminDSN is a connection string to instance in (Source or Verify) as
// AdminLogin, for the demo's own checks; database is the initial catalog.
func (s *Site) AdminDSN(in *sqlsim.Instance, database string) string {
	return in.DSN(AdminLogin, s.adminPassword, database)
}

// productLogins are ProductLogin on the source (for databases dbs) and on
// the verification instance, with the least the cycle needs (README
// "Permissions", internal/preflight): on the source CREATE ANY DATABASE
// (RESTORE HEADERONLY), VIEW SERVER PERFORMANCE STATE, ALTER ANY
// CONNECTION, db_backupoperator and the sequence table's SELECT and UPDATE
// in each database, SELECT on msdb's backup history; on the verification
// instance CREATE ANY DATABASE (it then owns the copies it restores),
// VIEW SERVER PERFORMANCE STATE, ALTER ANY CONNECTION and SELECT on msdb's
// restore history.
func productLogins(password string, dbs []string) (source, verify sqlsim.Login) {
	server := []string{tsql.PermCreateAnyDatabase, tsql.PermViewServerPerformanceState, tsql.PermAlterAnyConnection}
	source = sqlsim.Login{Name: ProductLogin, Password: password, Server: server,
		Databases: map[string][]string{"msdb": {tsql.PermSelect}}}
	for _, db := range dbs {
		source.Databases[db] = []string{tsql.RoleDBBackupOperator, tsql.PermSelect, tsql.PermUpdate}
	}
	verify = sqlsim.Login{Name: ProductLogin, Password: password, Server: server,
		Databases: map[string][]string{"msdb": {tsql.PermSelect}}}
	return source, verify
}

// prepare creates, on a new database, the small user tables and (for every
// database of the site, as an administrator does once) the sequence table
// the product's login may read and update but not create; on every start
// it stamps dbo.SiteActivity (the application "writing", which the
// freshness check looks for) and returns the row count of dbo.Orders for
// the `at_least` check. It runs before the worker starts: the emulator
// does not serialise metadata writes against a running BACKUP.
func (s *Site) prepare(ctx context.Context, adminPassword string) (int64, error) {
	db, err := mssql.Open(ctx, mssql.Target{Instance: SourceInstance, Address: s.Source.Addr(), User: AdminLogin,
		Password: adminPassword, Database: Database, Encrypt: "disable", ConnectTimeout: 10 * time.Second, AppName: "devenv"})
	if err != nil {
		return 0, fmt.Errorf("devenv: connect to %s: %w", SourceInstance, err)
	}
	defer db.Close()
	stmts := []string{`UPDATE dbo.SiteActivity SET LastWrite = GETUTCDATE() WHERE ID = 1`}
	if s.Created {
		stmts = []string{
			`CREATE TABLE dbo.Regions (RegionID int NOT NULL, Name nvarchar(40) NOT NULL, CONSTRAINT PK_Regions PRIMARY KEY CLUSTERED (RegionID))`,
			`INSERT INTO dbo.Regions (RegionID, Name) VALUES (1, N'North'), (2, N'East'), (3, N'South'), (4, N'West'), (5, N'Central')`,
			`CREATE TABLE dbo.SiteActivity (ID int NOT NULL, LastWrite datetime2 NOT NULL, CONSTRAINT PK_SiteActivity PRIMARY KEY CLUSTERED (ID))`,
			`INSERT INTO dbo.SiteActivity (ID, LastWrite) VALUES (1, GETUTCDATE())`,
		}
	}
	for _, name := range append([]string{Database}, s.FleetDatabases...) {
		setup, err := tsql.SequenceSetup(name)
		if err != nil {
			return 0, fmt.Errorf("devenv: %w", err)
		}
		stmts = append(stmts, setup...)
	}
	for _, q := range stmts {
		if _, err := db.ExecContext(ctx, q); err != nil {
			return 0, fmt.Errorf("devenv: prepare %s on %s: %s: %w (remove the state directory to start over)", Database, SourceInstance, q, err)
		}
	}
	v, _, err := db.QueryValue(ctx, "count orders", `SELECT COUNT_BIG(*) FROM dbo.Orders`)
	if err != nil {
		return 0, fmt.Errorf("devenv: count %s.dbo.Orders on %s: %w", Database, SourceInstance, err)
	}
	n, ok := v.(int64)
	if !ok || n < 1 {
		return 0, fmt.Errorf("devenv: %s.dbo.Orders on %s has %v rows: remove the state directory to start over", Database, SourceInstance, v)
	}
	return n, nil
}
