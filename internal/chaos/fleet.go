package chaos

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	_ "github.com/microsoft/go-mssqldb" // driver "sqlserver" for the harness's own queries
	sdkclient "go.temporal.io/sdk/client"

	"github.com/backupcycle/backupcycle/internal/catalog"
	"github.com/backupcycle/backupcycle/internal/config"
	"github.com/backupcycle/backupcycle/internal/devserver"
	"github.com/backupcycle/backupcycle/internal/sambatest"
	"github.com/backupcycle/backupcycle/internal/sqlsim"
	"github.com/backupcycle/backupcycle/starter/client"
	"github.com/backupcycle/backupcycle/workflows"
)

// Names of the fleet. DBA exists on sql01 and sql02 (the same name on two
// instances is one of the paths under test); each has one other database:
// sales on sql01 (a lower-case name, whose files carry it as it is), HR on
// sql02 (encrypted with TDE). Orders is on sql02 and sql03, the database of
// the availability group agorders (AG_Orders on SQL Server) whose replicas
// they are. (Not sql01 and sql02: a DBA database on each of two replicas
// cannot have a databases: entry on each, which the configuration refuses
// as two entries of one possible availability database.) sql01 also
// selects every database named sales* (the fleet's selection): the
// databases named like a set of sales that the simulation creates (twins,
// see Sim.twin) are part of the fleet that way.
const (
	Sql01      = "sql01"
	Sql02      = "sql02"
	Sql03      = "sql03"
	Verify01   = "verify01"
	Bak01      = "bak01"
	Bak02      = "bak02"
	SharedDB   = "DBA"
	SalesDB    = "sales"
	TDETarget  = "HR"
	AGroup     = "agorders"
	AGName     = "AG_Orders"
	AGDatabase = "Orders"
	tdeCert    = "TDECert"
	taskQueue  = "chaos"
	share      = "backup"
	// manifestKeyEnv holds the workers' manifest key (manifest_keys): what
	// a share writer plants is not signed with it (hostile.go).
	manifestKeyEnv = "BC_CHAOS_MANIFEST_KEY"
	manifestKeyID  = "chaos-1"
)

// agReplicas are the availability group's replicas, in the configuration's
// order.
var agReplicas = []string{Sql02, Sql03}

// Servers are the backup servers, in a stable order.
var Servers = []string{Bak01, Bak02}

// Target is one database of the configuration: (instance, database).
type Target struct {
	Instance string
	Database string
}

func (t Target) String() string { return t.Instance + "/" + t.Database }

// Targets are the configured databases, in a stable order. The group's
// database is keyed by the group, as the product keys it.
var Targets = []Target{{Sql01, SharedDB}, {Sql01, SalesDB}, {Sql02, SharedDB}, {Sql02, TDETarget}, {AGroup, AGDatabase}}

// baseEstate is the estate the fleet starts in: every instance the newest
// build, on UTC, the certificate on verify01, sql02 the group's primary.
var baseEstate = Estate{Build: [4]string{"16.0.4135.4", "16.0.4135.4", "16.0.4135.4", "16.0.4135.4"},
	Zone: [4]string{"UTC", "UTC", "UTC", "UTC"}, TDECert: true, AGPrimary: Sql02, AGPreference: "SECONDARY", AGSync: "SYNCHRONIZED", Via: AGroup}

// UNC is the path SQL Server uses for a backup server's share.
func UNC(server string) string { return `\\` + server + `\` + share }

// Options size the fleet.
type Options struct {
	// Dir holds everything (share directories, instance data, logs, the
	// Temporal SQLite file); "" is a new temporary directory, removed by
	// Close unless Keep.
	Dir  string
	Keep bool
	// DBSize of every source database (default 4 MiB).
	DBSize int64
	// Throttle paces every BACKUP/RESTORE stream and CHECKDB, so the
	// steps last long enough to be hit mid-way (default 3 MiB/s).
	Throttle int64
	// Workers is the number of live worker processes (default 2).
	Workers int
	// WorkerBinary is the executable started in worker mode (the test binary).
	WorkerBinary string
}

// Fleet is the simulated estate: two source instances, a verification
// instance, two backup servers on Samba, the embedded Temporal server with a
// file-backed store, worker processes, and the configuration naming them.
type Fleet struct {
	opts    Options
	Root    string
	ownsDir bool
	dirs    map[string]string

	Instances map[string]*sqlsim.Instance // sql01, sql02, verify01
	// pit is the checker's own instance, where it restores the log chain
	// to a point in time (I11): no fault reaches it, no product uses it.
	pit      *sqlsim.Instance
	SMB      map[string]*sambatest.Server
	smbExtra map[string]string // include file of each smbd: the share-full fault writes it

	passwords map[string]string // env var -> value
	CfgPath   string
	Cfg       *config.Config

	tport  int
	dbFile string

	mu       sync.Mutex
	temporal *devserver.Server
	client   sdkclient.Client

	workers    []*Worker
	nextWorker int

	// The estate the fleet is in (ApplyEstate), the availability group over
	// the source instances, the TDE certificate of HR (exported from
	// sql02), statements of instances replaced since (retire), and how the
	// configuration spells HR's entry.
	estate     Estate
	estateSet  bool
	group      *sqlsim.AvailabilityGroup
	tdeCert    sqlsim.Certificate
	retired    map[string][]sqlsim.StatementRecord
	entryLower bool
	// keys is the manifest key ring the workers sign with: the checker
	// trusts a manifest as the product does (catalog.Manifest.Trusted).
	keys *catalog.Keys
	// vault is the object store vault01 (vault.go); immWithinOn says
	// whether the configuration sets immutable_within (ImmutableWithin),
	// which a configuration without that key refuses.
	vault       *Vault
	immWithinOn bool
}

// Secrets are every configured password: none may reach a workflow
// history, a log line or an error (I6).
func (f *Fleet) Secrets() []string {
	out := make([]string, 0, len(f.passwords))
	for _, v := range f.passwords {
		out = append(out, v)
	}
	return out
}

func secret(prefix string) string {
	b := make([]byte, 9)
	_, _ = rand.Read(b)
	return prefix + hex.EncodeToString(b)
}

// Start brings the fleet up. On error, what was started is stopped again.
func Start(ctx context.Context, opts Options) (_ *Fleet, err error) {
	if opts.DBSize == 0 {
		opts.DBSize = 4 << 20
	}
	if opts.Throttle == 0 {
		opts.Throttle = 3 << 20
	}
	if opts.Workers == 0 {
		opts.Workers = 2
	}
	if opts.WorkerBinary == "" {
		opts.WorkerBinary = os.Args[0]
	}
	if err := sambatest.Installed(); err != nil {
		return nil, err
	}
	f := &Fleet{opts: opts, dirs: map[string]string{}, Instances: map[string]*sqlsim.Instance{},
		SMB: map[string]*sambatest.Server{}, smbExtra: map[string]string{}, passwords: map[string]string{},
		retired: map[string][]sqlsim.StatementRecord{}, estate: baseEstate, immWithinOn: true}
	defer func() {
		if err != nil {
			f.Close()
		}
	}()
	f.Root = opts.Dir
	if f.Root == "" {
		if f.Root, err = os.MkdirTemp("", "chaos-"); err != nil {
			return nil, err
		}
		f.ownsDir = !opts.Keep
	}
	// smbd switches to the share user: every directory on the way to the
	// shares must be traversable.
	if err := os.Chmod(f.Root, 0o755); err != nil {
		return nil, err
	}
	for _, d := range []string{Bak01, Bak02, "restore/data", "restore/log", Sql01, Sql02, Sql03, Verify01, "logs", "smb", outsideDir, "dba", "pit", Vault01} {
		f.dirs[d] = filepath.Join(f.Root, d)
		if err := os.MkdirAll(f.dirs[d], 0o755); err != nil {
			return nil, err
		}
	}

	// Backup servers: Samba over SMB for the worker; SQL Server writes the
	// same directories by UNC path.
	for _, name := range Servers {
		env := "BC_CHAOS_" + strings.ToUpper(name) + "_PASSWORD"
		f.passwords[env] = secret("Smb-")
		extra := filepath.Join(f.dirs["smb"], name+"-extra.conf")
		if err := os.WriteFile(extra, nil, 0o644); err != nil {
			return nil, err
		}
		f.smbExtra[name] = extra
		srv, err := sambatest.Run(sambatest.Options{User: "bakuser", Password: f.passwords[env], TempDir: f.dirs["smb"],
			SharePaths: map[string]string{share: f.dirs[name]}, Global: []string{"include = " + extra}})
		if err != nil {
			return nil, fmt.Errorf("chaos: smbd for %s: %w", name, err)
		}
		f.SMB[name] = srv
	}

	// The object store, its bucket locked, the worker's user unable to
	// delete a version.
	f.passwords[vaultEnv], f.passwords[vaultRootEnv] = secret("S3-"), secret("S3root-")
	if f.vault, err = startVault(ctx, f.dirs[Vault01], f.passwords[vaultRootEnv], f.passwords[vaultEnv]); err != nil {
		return nil, fmt.Errorf("chaos: object store %s: %w", Vault01, err)
	}

	f.dirs["restore"] = filepath.Join(f.Root, "restore")
	for _, name := range estateInstances {
		f.passwords[passwordEnv(name)] = secret("Sql-")
		i := estateIndex(name)
		cfg, err := f.instanceConfig(name, baseEstate.Build[i], baseEstate.Zone[i])
		if err != nil {
			return nil, err
		}
		in, err := sqlsim.New(cfg)
		if err != nil {
			return nil, err
		}
		if err := in.Start(); err != nil {
			return nil, err
		}
		f.Instances[name] = in
		in.SetThrottle(opts.Throttle)
	}
	for _, t := range Targets {
		on := []string{t.Instance}
		if t.Instance == AGroup {
			on = agReplicas // every replica holds a copy of the group's database
		}
		for _, name := range on {
			spec := sqlsim.DatabaseSpec{Name: t.Database, Size: opts.DBSize, DataFiles: 2}
			if t == CutTarget {
				spec.Size = max(spec.Size, CutTargetSize)
			}
			if t == LogTarget {
				spec.CommitRate = CommitRate
			}
			if err := f.Instances[name].CreateDatabase(spec); err != nil {
				return nil, err
			}
		}
	}
	// HR is encrypted (TDE) by a certificate of sql02 whose private key
	// was backed up; verify01 holds it as the estate says.
	src := f.Instances[Sql02]
	if _, err := src.CreateCertificate(tdeCert, "TDE certificate of "+TDETarget); err != nil {
		return nil, err
	}
	if err := src.EnableTDE(TDETarget, tdeCert); err != nil {
		return nil, err
	}
	if f.tdeCert, err = src.ExportCertificate(tdeCert); err != nil {
		return nil, err
	}
	if err := f.Instances[Verify01].ImportCertificate(f.tdeCert); err != nil {
		return nil, err
	}
	if err := f.buildGroup(baseEstate); err != nil {
		return nil, err
	}
	if err := f.startPit(); err != nil {
		return nil, err
	}
	// The manifest key is a secret like the passwords (I6).
	f.passwords[manifestKeyEnv] = secret("Key-") + secret("")
	if f.keys, err = catalog.NewKeys(catalog.Key{ID: manifestKeyID, Secret: []byte(f.passwords[manifestKeyEnv])}); err != nil {
		return nil, err
	}
	for k, v := range f.passwords {
		if err := os.Setenv(k, v); err != nil {
			return nil, err
		}
	}

	// Temporal: a fixed port and a SQLite file, so a restart finds the
	// same server with the same workflows.
	if f.tport, err = freePort(); err != nil {
		return nil, err
	}
	f.dbFile = filepath.Join(f.Root, "temporal.db")
	if err := f.startTemporal(ctx); err != nil {
		return nil, err
	}

	f.CfgPath = filepath.Join(f.Root, "backupcycle.yaml")
	if err := f.writeConfig(); err != nil {
		return nil, err
	}

	// One schedule per database, as `starter schedule` makes them; paused,
	// so only the simulation's triggers start them.
	sc := f.Starter()
	if _, err := sc.ApplySchedules(ctx, f.Cfg, client.ScheduleSpec{Cron: "0 0 1 1 *"}); err != nil {
		return nil, fmt.Errorf("chaos: schedules: %w", err)
	}
	for _, t := range Targets {
		if err := sc.PauseSchedule(ctx, client.ScheduleID(t.Instance, t.Database), "chaos: triggered by the simulation only"); err != nil {
			return nil, err
		}
	}
	// LogTarget's drill schedule, as the worker keeps it: paused as well.
	if _, _, err := sc.EnsureDrillSchedules(ctx, f.Cfg); err != nil {
		return nil, fmt.Errorf("chaos: drill schedules: %w", err)
	}
	if err := sc.PauseSchedule(ctx, client.DrillScheduleID(LogTarget.Instance, LogTarget.Database), "chaos: triggered by the simulation only"); err != nil {
		return nil, err
	}
	for range opts.Workers {
		if _, err := f.StartWorker(); err != nil {
			return nil, err
		}
	}
	return f, nil
}

// writeConfig writes the configuration file and loads it into Cfg.
func (f *Fleet) writeConfig() error {
	cfg, err := f.loadConfig()
	if err != nil {
		return fmt.Errorf("chaos: configuration: %w", err)
	}
	ScaleLogChain(cfg)
	f.Cfg = cfg
	return nil
}

func (f *Fleet) loadConfig() (*config.Config, error) {
	if err := os.WriteFile(f.CfgPath, []byte(f.yaml()), 0o600); err != nil {
		return nil, err
	}
	return config.Load(f.CfgPath)
}

// entryName is how the configuration's databases: entry spells db.
func (f *Fleet) entryName(db string) string {
	if db == TDETarget && f.entryLower {
		return strings.ToLower(db)
	}
	return db
}

// yaml is the configuration: short waits and deadlines so that a cycle
// takes seconds and a fault minutes at most.
func (f *Fleet) yaml() string {
	var b strings.Builder
	fmt.Fprintf(&b, "temporal:\n  address: %s\n  namespace: %s\n  task_queue: %s\n", f.frontend(), devserver.DefaultNamespace, taskQueue)
	fmt.Fprintf(&b, "manifest_keys:\n  - {id: %s, key_env: %s}\n", manifestKeyID, manifestKeyEnv)
	b.WriteString(`defaults:
  stripes: 2
  compression: false
  sequence: table
  sql_host_wait: {initial: 1s, max_interval: 2s, give_up_after: 20s}
  backup_server_wait: {initial: 1s, max_interval: 2s, give_up_after: 15s}
  copy_wait: {initial: 1s, max_interval: 2s}
  copy_deadline: 30s
  retention: {keep_verified: 2, delete_failed_after: 2m}
sql_instances:
`)
	for _, name := range estateInstances {
		fmt.Fprintf(&b, "  - name: %s\n    address: %s\n    user: sa\n    password_env: BC_CHAOS_%s_PASSWORD\n    encrypt: disable\n    connect_timeout: 5s\n",
			name, f.Instances[name].Addr(), strings.ToUpper(name))
		if name == Sql01 {
			b.WriteString("    databases: [\"" + SalesDB + "*\"]\n    backup_servers: [bak01, bak02]\n")
		}
	}
	fmt.Fprintf(&b, "availability_groups:\n  - name: %s\n    availability_group: %s\n    replicas: [%s]\n", AGroup, AGName, strings.Join(agReplicas, ", "))
	b.WriteString("backup_servers:\n")
	for _, name := range Servers {
		fmt.Fprintf(&b, `  - name: %s
    unc_paths: ['%s']
    location: %s
    smb:
      user: %s
      password_env: BC_CHAOS_%s_PASSWORD
    verify_instance: %s
    restore_data_dir: 'D:\restore\data'
    restore_log_dir: 'D:\restore\log'
    bandwidth_limit: 4MiB
`, name, UNC(name), f.SMB[name].URL(share), f.SMB[name].User(), strings.ToUpper(name), Verify01)
	}
	if f.vault != nil {
		b.WriteString(f.vault.yaml())
	}
	b.WriteString("databases:\n")
	for _, t := range Targets {
		fmt.Fprintf(&b, `  - name: %s
    instance: %s
    backup_servers: [bak01, bak02]
    sanity_checks:
      - name: orders-present
        query: SELECT COUNT_BIG(*) FROM dbo.Orders
        at_least: 1
`, f.entryName(t.Database), t.Instance)
		if t.Instance == Sql02 {
			// Both DBA copies restore on verify01: the second needs its own name.
			b.WriteString("    verify_name: \"{instance}_{db}_verify\"\n")
		}
		if t == CutTarget {
			// One stripe above vault01's part size: a multipart upload.
			b.WriteString("    stripes: 1\n")
		}
		if t == Targets[0] {
			// One database keeps its verification copy: the re-attach path.
			b.WriteString("    keep_verify_db: true\n")
		}
		if t == LogTarget {
			b.WriteString(logYAML)
		}
		if _, ok := immutableTarget(t.Instance, t.Database); ok && f.vault != nil {
			b.WriteString("    immutable_copy: " + Vault01 + "\n")
			if f.immWithinOn {
				fmt.Fprintf(&b, "    immutable_within: %s\n", ImmutableWithin)
			}
		}
	}
	return b.String()
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func (f *Fleet) frontend() string { return fmt.Sprintf("127.0.0.1:%d", f.tport) }

func (f *Fleet) startTemporal(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	srv, err := devserver.Start(ctx, devserver.Options{DBFile: f.dbFile, FrontendPort: f.tport, UIPort: devserver.NoUI,
		SearchAttributes: workflows.SearchAttributeTypes})
	if err != nil {
		return fmt.Errorf("chaos: embedded Temporal on %s: %w", f.dbFile, err)
	}
	c, err := srv.NewClient(ctx, sdkclient.Options{Logger: quietLogger})
	if err != nil {
		_ = srv.Stop()
		return err
	}
	f.mu.Lock()
	f.temporal, f.client = srv, c
	f.mu.Unlock()
	return nil
}

// StopTemporal stops the embedded server (the crash of the Temporal host).
func (f *Fleet) StopTemporal() error {
	f.mu.Lock()
	srv, c := f.temporal, f.client
	f.temporal, f.client = nil, nil
	f.mu.Unlock()
	if c != nil {
		c.Close()
	}
	if srv == nil {
		return nil
	}
	return srv.Stop()
}

// StartTemporal starts it again on the same port and file; a no-op when it runs.
func (f *Fleet) StartTemporal(ctx context.Context) error {
	f.mu.Lock()
	up := f.temporal != nil
	f.mu.Unlock()
	if up {
		return nil
	}
	return f.startTemporal(ctx)
}

// Client is the harness's Temporal client (nil while the server is down).
func (f *Fleet) Client() sdkclient.Client {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.client
}

// Starter is the product's client package on the harness's connection:
// the entry point of `starter run` and `starter schedule`.
func (f *Fleet) Starter() *client.Client {
	return client.New(f.Client(), f.Cfg.Temporal, nil)
}

// StartWorker starts one more worker process.
func (f *Fleet) StartWorker() (*Worker, error) {
	f.nextWorker++
	n := f.nextWorker
	w, err := startWorker(f.opts.WorkerBinary, f.CfgPath, fmt.Sprintf("chaos-worker-%02d", n), workerLogName(f.dirs["logs"], n))
	if err != nil {
		return nil, err
	}
	f.workers = append(f.workers, w)
	return w, nil
}

// RestartWorkers replaces every worker process by a new one (they read the
// configuration when they start); no cycle may run meanwhile.
func (f *Fleet) RestartWorkers() error {
	for _, w := range f.Workers() {
		w.Kill()
	}
	return f.EnsureWorkers()
}

// Workers are the worker processes still alive, oldest first.
func (f *Fleet) Workers() []*Worker {
	var out []*Worker
	for _, w := range f.workers {
		if w.Alive() {
			out = append(out, w)
		}
	}
	return out
}

// WorkerLogs are the log files of every worker ever started.
func (f *Fleet) WorkerLogs() []string {
	out := make([]string, 0, len(f.workers))
	for _, w := range f.workers {
		out = append(out, w.LogFile)
	}
	return out
}

// EnsureWorkers thaws nothing and kills frozen or surplus workers (oldest
// first) and starts new ones until exactly opts.Workers live and run.
func (f *Fleet) EnsureWorkers() error {
	for _, w := range f.Workers() {
		if w.frozen {
			w.Kill()
		}
	}
	live := f.Workers()
	for i := 0; i < len(live)-f.opts.Workers; i++ {
		live[i].Kill()
	}
	for range f.opts.Workers - len(f.Workers()) {
		if _, err := f.StartWorker(); err != nil {
			return err
		}
	}
	return nil
}

// ShareDir is the local directory behind a backup server's share.
func (f *Fleet) ShareDir(server string) string { return f.dirs[server] }

// LocalPath maps a path as SQL Server sees it (\\bak01\backup\x.bak) to the
// local file; "" when it is on no backup server.
func (f *Fleet) LocalPath(p string) string {
	norm := strings.ReplaceAll(p, "/", `\`)
	for _, s := range Servers {
		prefix := UNC(s) + `\`
		if len(norm) > len(prefix) && strings.EqualFold(norm[:len(prefix)], prefix) {
			return filepath.Join(f.dirs[s], filepath.FromSlash(strings.ReplaceAll(norm[len(prefix):], `\`, "/")))
		}
	}
	return ""
}

// SetShareFull makes the share of server report 1 MiB free to SMB clients
// (Samba's max disk size, read again by smbd for the next connection), or
// lifts the limit.
func (f *Fleet) SetShareFull(server string, full bool) error {
	content := ""
	if full {
		// Samba reports min(free, max disk size) as free: 1 MiB is less
		// than one stripe.
		content = "max disk size = 1\n"
	}
	return os.WriteFile(f.smbExtra[server], []byte(content), 0o644)
}

func dirBytes(dir string) (int64, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return 0, err
	}
	var n int64
	for _, e := range entries {
		if fi, err := e.Info(); err == nil && fi.Mode().IsRegular() {
			n += fi.Size()
		}
	}
	return n, nil
}

// DB opens the harness's own connection to an instance (directly, not
// through the proxy the product uses).
func (f *Fleet) DB(instance string) (*sql.DB, error) {
	in := f.Instances[instance]
	if in == nil {
		return nil, fmt.Errorf("chaos: no instance %s", instance)
	}
	db, err := sql.Open("sqlserver", in.DSN("sa", f.passwords[passwordEnv(instance)], "master"))
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(2)
	return db, nil
}

// exec runs one statement on an instance with a bound.
func (f *Fleet) exec(ctx context.Context, instance, stmt string) error {
	db, err := f.DB(instance)
	if err != nil {
		return err
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	_, err = db.ExecContext(ctx, stmt)
	return err
}

// RestartInstance starts a crashed instance again (a no-op when it runs).
func (f *Fleet) RestartInstance(name string) error {
	err := f.Instances[name].Start()
	if err != nil && strings.Contains(err.Error(), "already running") {
		return nil
	}
	return err
}

// InstanceUp reports whether the instance accepts connections.
func (f *Fleet) InstanceUp(name string) bool {
	c, err := net.DialTimeout("tcp", f.Instances[name].Addr(), time.Second)
	if err != nil {
		return false
	}
	c.Close()
	return true
}

// Heal brings every component back: Temporal up, instances up, smbd running
// and thawed, no share limit, the configured number of live workers.
func (f *Fleet) Heal(ctx context.Context) error {
	var errs []error
	if err := f.StartTemporal(ctx); err != nil {
		errs = append(errs, err)
	}
	for name := range f.Instances {
		if err := f.RestartInstance(name); err != nil {
			errs = append(errs, err)
		}
		for _, s := range Servers {
			f.Instances[name].SetShareQuota(UNC(s), 0)
		}
	}
	for _, s := range Servers {
		f.SMB[s].Thaw()
		if err := f.SetShareFull(s, false); err != nil {
			errs = append(errs, err)
		}
		if !smbUp(f.SMB[s]) {
			if err := restartSMB(f.SMB[s]); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if f.vault != nil {
		if err := f.vault.Start(); err != nil {
			errs = append(errs, err)
		}
	}
	if err := f.EnsureWorkers(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

func smbUp(s *sambatest.Server) bool {
	c, err := net.DialTimeout("tcp", s.Addr(), time.Second)
	if err != nil {
		return false
	}
	c.Close()
	return true
}

// restartSMB is sambatest's Restart, which panics (no testing.TB) on failure.
func restartSMB(s *sambatest.Server) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("chaos: restart smbd on %s: %v", s.Addr(), r)
		}
	}()
	s.Restart()
	return nil
}

// Close stops everything and removes the directory it created.
func (f *Fleet) Close() {
	for _, w := range f.workers {
		if w.Alive() {
			w.Kill()
		}
	}
	_ = f.StopTemporal()
	for _, in := range f.Instances {
		_ = in.Stop()
	}
	if f.pit != nil {
		_ = f.pit.Stop()
	}
	for _, s := range f.SMB {
		_ = s.Close()
	}
	if f.vault != nil {
		f.vault.Close()
	}
	if f.ownsDir && f.Root != "" {
		_ = os.RemoveAll(f.Root)
	}
}
