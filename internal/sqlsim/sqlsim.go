package sqlsim

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/backupcycle/backupcycle/internal/sqlsim/tds"
)

// Config configures an Instance.
type Config struct {
	// Name is the server name (@@SERVERNAME, SERVERPROPERTY('ServerName'));
	// default "sqlsim".
	Name string
	// ListenAddr defaults to 127.0.0.1:0 (a free port).
	ListenAddr string
	// DataDir holds the catalog, the default database directory and the
	// default backup directory. Required.
	DataDir string
	// Logins maps user to password (SQL authentication); these logins are
	// sysadmin. Default sa/"" (when Principals is empty too).
	Logins map[string]string
	// Principals are logins with exactly the permissions listed (not
	// sysadmin unless Login.Sysadmin); see Login.
	Principals []Login
	// Edition is "Developer" (default), "Enterprise", "Standard", "Web" or
	// "Express": SERVERPROPERTY('Edition'/'EngineEdition') and what the
	// edition refuses (Express and Web: no backup compression; Express: no
	// database over 10 GB of data).
	Edition string
	// Platform is the host's operating system, "Windows" (default) or
	// "Linux": sys.dm_os_host_info, and how paths fail there (no UNC
	// paths; a missing directory is operating system error 2).
	Platform string
	// Configuration sets server configuration options (sys.configurations)
	// by name, e.g. OptionFilestreamAccessLevel: 2; see configOptions for
	// those known and their defaults.
	Configuration map[string]int64
	// QAT says the Intel QAT drivers are installed (SQL Server 2022 on
	// Windows): with "hardware offload enabled" 1 the accelerator is
	// loaded (sys.dm_server_accelerator_status), BACKUP WITH COMPRESSION
	// under "backup compression algorithm" 2 writes QAT_DEFLATE, and
	// QAT_DEFLATE backups can be restored.
	QAT bool
	// MajorVersion is 13 (SQL Server 2016), 14 (2017), 15 (2019) or 16
	// (2022, default): @@VERSION, SERVERPROPERTY('ProductVersion'), and
	// which permission lets a login see other sessions' requests, and which
	// backups RESTORE reads (none of a newer major version).
	MajorVersion int
	// ProductVersion picks a build of MajorVersion ("15.0.4198.2" is 2019
	// CU15); "" is the newest the emulator knows. A backup records the build
	// that wrote it (HEADERONLY SoftwareVersionMajor/Minor/Build). Known
	// builds: 13.0.6300.2, 13.0.4446.0, 13.0.4435.0, 14.0.3456.2,
	// 15.0.4385.2, 15.0.4223.1, 15.0.4198.2, 16.0.4135.4. With
	// MajorVersion 0 the major comes from it.
	ProductVersion string
	// TimeZone is the server's local time (GETDATE, HEADERONLY dates,
	// msdb history); default UTC.
	TimeZone *time.Location
	// TLS is "" (no encryption: PRELOGIN answers ENCRYPT_NOT_SUP), "on"
	// (PRELOGIN answers ENCRYPT_ON/REQ and the login and everything after
	// it run over TLS with a certificate generated at New, see
	// Instance.CertificatePEM) or "strict" (TDS 8.0: TLS first, ALPN
	// "tds/8.0", before any TDS packet).
	TLS string
	// Shares maps path prefixes as SQL Server sees them (`\\bak01\backup`,
	// `D:\restore`) to local directories. Matching is case-insensitive and
	// treats / and \ alike.
	Shares map[string]string
	// MemoryBudget bounds BUFFERCOUNT x MAXTRANSFERSIZE of one BACKUP or
	// RESTORE (seed 004: beyond it, error 701); default 1 GiB.
	MemoryBudget int64
	// Collation is the server collation (SERVERPROPERTY('Collation')), by
	// which database names and strings compare: DefaultCollation
	// (case-insensitive) when empty; a _CS_AS, _BIN or _BIN2 collation
	// makes names case-sensitive, as on SAP estates (collation.go).
	Collation string
	Logger    *zap.Logger
}

// Instance is one emulated SQL Server.
type Instance struct {
	cfg  Config
	log  *zap.Logger
	coll collation // Config.Collation, parsed

	mu       sync.Mutex
	cat      *catalogState
	srv      *tds.Server
	ln       net.Listener
	addr     string
	running  bool
	crashed  chan struct{} // closed by Crash; replaced by Start
	sessions map[uint16]*session
	requests map[*request]struct{}
	stmts    []*StatementRecord
	faults   faultState
	devices  deviceTable // backup files open by running BACKUP/RESTORE (devices.go)
	backups  backupLocks // one data backup per database at a time (backuplock.go)
	shares   []shareMap
	logins   map[string]*Login     // lower-case name -> login (perms.go)
	tls      *tlsState             // Config.TLS (tls.go); nil when off
	fatalAt  map[string]fatalFault // FatalErrorAt (fatal.go), guarded by mu
	// xp_cmdshell (security.go): the server option, the calls that ran;
	// guarded by mu.
	xpCmdShell bool
	xpRuns     []XPCmdShellRun
	// pendingIDs are database ids CreateDatabase holds while it writes the
	// files, guarded by mu.
	pendingIDs map[int]bool
	// clockAhead is how far the server's clock runs ahead of the host's
	// (StampCreateLate), in nanoseconds.
	clockAhead atomic.Int64
	ag         *AvailabilityGroup // the group this instance is a replica of (ag.go), guarded by mu
	// The workload (workload.go): rowsMu orders writes of dbo.CommitLog
	// rows against BACKUP's reads of them; commitLogs and workloads are
	// guarded by mu.
	rowsMu     sync.RWMutex
	commitLogs map[*database]*commitLogState
	workloads  map[string]workload

	// metaMu orders metadata (boot page) updates against every read of
	// the boot pages, so no reader sees a half-written metadata set.
	metaMu sync.RWMutex
	ops    sync.WaitGroup
}

type shareMap struct {
	prefix string // normalised: lower case, \ separators, no trailing \
	raw    string
	dir    string
	// windows: a UNC path or a drive, whose file names match
	// case-insensitively; a /path is SQL Server on Linux's own file system.
	windows bool
}

// catalogState is what survives a restart (catalog.json in DataDir).
type catalogState struct {
	NextDBID        int                 `json:"next_db_id"`
	Databases       []*database         `json:"databases"`
	RestoreHistory  []restoreHistoryRow `json:"restore_history"`
	BackupSets      []backupSetRow      `json:"backup_sets"`
	NextRestoreID   int64               `json:"next_restore_id"`
	NextBackupSetID int64               `json:"next_backup_set_id"`
	LSN             uint64              `json:"lsn"`
	// Certificates are master's server certificates (tde.go).
	Certificates []*certificate `json:"certificates,omitempty"`
	// AsymmetricKeys are master's asymmetric keys (asymkey.go).
	AsymmetricKeys []*asymmetricKey `json:"asymmetric_keys,omitempty"`
	// AgentJobs are msdb's SQL Server Agent jobs (AddAgentJob).
	AgentJobs []agentJob `json:"agent_jobs,omitempty"`
}

// agentJob is a job of msdb.dbo.sysjobs with its steps (sysjobsteps).
type agentJob struct {
	ID    guid           `json:"id"`
	Name  string         `json:"name"`
	Steps []agentJobStep `json:"steps"`
}

type agentJobStep struct {
	Name, Subsystem, Command, Database string
}

// AgentJobStep is one step of a SQL Server Agent job (AddAgentJob):
// Subsystem "TSQL" or "CmdExec", the command it runs, and for T-SQL the
// database it runs in.
type AgentJobStep struct {
	Name, Subsystem, Command, Database string
}

// AddAgentJob adds a SQL Server Agent job, e.g. a maintenance job that
// runs Ola Hallengren's DatabaseIntegrityCheck on USER_DATABASES; it shows
// in msdb.dbo.sysjobs and sysjobsteps. The emulator never runs it.
func (in *Instance) AddAgentJob(name string, steps ...AgentJobStep) error {
	in.mu.Lock()
	defer in.mu.Unlock()
	j := agentJob{ID: newGUID(), Name: name}
	for _, s := range steps {
		j.Steps = append(j.Steps, agentJobStep(s))
	}
	in.cat.AgentJobs = append(in.cat.AgentJobs, j)
	return in.saveCatalog()
}

type database struct {
	ID         int       `json:"id"`
	Name       string    `json:"name"`
	Files      []dbFile  `json:"files"`
	Created    time.Time `json:"created"`
	UserAccess string    `json:"user_access"`
	// State is "" (ONLINE) or "RESTORING" (a RESTORE created it and has
	// not finished; only DROP or another RESTORE apply).
	State string `json:"state,omitempty"`
	// Owner is the login that created the database by RESTORE or CREATE
	// DATABASE ("" for one created by CreateDatabase: owned by sa); the
	// owner is dbo in it.
	Owner string `json:"owner,omitempty"`
	// ReadOnly is ALTER DATABASE ... SET READ_ONLY.
	ReadOnly bool `json:"read_only,omitempty"`
	// LastGoodCheckDB is when the last DBCC CHECKDB that found nothing
	// ended, as wall-clock text without a zone (wallLayout):
	// DATABASEPROPERTYEX 'LastGoodCheckDbTime', a datetime "of the last
	// successful DBCC CHECKDB that ran on the specified database"
	// (https://learn.microsoft.com/sql/t-sql/functions/databasepropertyex-transact-sql),
	// on the clock of the server that ran it. SQL Server keeps it in the
	// database's boot page, which a BACKUP copies with every other page and
	// a RESTORE writes back ("Restore and recovery overview",
	// https://learn.microsoft.com/sql/relational-databases/backup-restore/restore-and-recovery-overview-sql-server):
	// a restored copy reports its source's value, on the source's clock,
	// until a CHECKDB of the copy ends clean. "" when none did.
	LastGoodCheckDB string `json:"last_good_checkdb_wall,omitempty"`
	// FamilyGUID identifies the database across backup and restore: new
	// for a created database, the backup's for a restored one (RESTORE
	// without REPLACE compares it, see restoreDatabase).
	FamilyGUID guid `json:"family_guid"`
	// TDEThumbprint is the thumbprint (hex) of the server certificate
	// protecting the database encryption key; "" without TDE (tde.go).
	TDEThumbprint string `json:"tde_thumbprint,omitempty"`
	// Containment is 1 for a partially contained database, 0 otherwise
	// (sys.databases.containment).
	Containment int `json:"containment,omitempty"`
	// RecoveryModel is FULL (""), BULK_LOGGED or SIMPLE (logchain.go).
	RecoveryModel string `json:"recovery_model,omitempty"`
	// The database's log (logchain.go): EndLSN is the LSN its next log
	// record gets; ChainLSN where the next log backup starts
	// (sys.database_recovery_status.last_log_backup_lsn), 0 while there is
	// no log chain; FullCheckpointLSN the CheckpointLSN of the last
	// conventional full backup (a later backup's DatabaseBackupLSN);
	// CheckpointLSN the last checkpoint.
	EndLSN            uint64 `json:"end_lsn,omitempty"`
	ChainLSN          uint64 `json:"chain_lsn,omitempty"`
	ChainNew          bool   `json:"chain_new,omitempty"` // no log backup on ChainLSN yet (BeginsLogChain)
	FullCheckpointLSN uint64 `json:"full_checkpoint_lsn,omitempty"`
	CheckpointLSN     uint64 `json:"checkpoint_lsn,omitempty"`
	// DiffBaseGUID and DiffBaseLSN are the differential base
	// (differential.go): of a source, its last conventional full; of a
	// database being restored, the full restored first. DiffApplied: a
	// restore sequence past that full (a differential or a log applied).
	DiffBaseGUID guid   `json:"diff_base_guid,omitzero"`
	DiffBaseLSN  uint64 `json:"diff_base_lsn,omitempty"`
	DiffApplied  bool   `json:"diff_applied,omitempty"`
	// A database in a restore sequence (restorelog.go): RedoLSN is where
	// roll forward continues (sys.master_files.redo_start_lsn), RedoTime
	// the wall clock of the last commit redone (or of the data backup's
	// end); Standby is RESTORE WITH STANDBY (read-only, queryable) with its
	// undo file; Stopped says a STOPAT point was reached, so only RECOVERY
	// remains.
	RedoLSN     uint64    `json:"redo_lsn,omitempty"`
	RedoTime    time.Time `json:"redo_time,omitzero"`
	Standby     bool      `json:"standby,omitempty"`
	StandbyFile string    `json:"standby_file,omitempty"`
	Stopped     bool      `json:"stopped,omitempty"`
	// Recovery forks (forks.go): RecoveryFork the fork the database is on,
	// ChainFork the fork of ChainLSN and ForkPointLSN where RecoveryFork
	// began, when they differ; RedoFork the fork of RedoLSN.
	RecoveryFork guid   `json:"recovery_fork,omitzero"`
	ChainFork    guid   `json:"chain_fork,omitzero"`
	ForkPointLSN uint64 `json:"fork_point_lsn,omitempty"`
	RedoFork     guid   `json:"redo_fork,omitzero"`
	// CommitRate is the workload's commits per second (workload.go); 0 none.
	CommitRate float64 `json:"commit_rate,omitempty"`
	// Trustworthy is ALTER DATABASE ... SET TRUSTWORTHY ON; kept by the
	// instance (sys.databases.is_trustworthy_on), so a RESTORE, which
	// creates the database anew, leaves it OFF.
	Trustworthy bool `json:"trustworthy,omitempty"`
	system      bool
}

// familyGUID is d's family GUID; catalogs written before it was recorded
// get a stable one derived from the database's identity.
func (in *Instance) familyGUID(d *database) guid {
	if d.FamilyGUID != (guid{}) {
		return d.FamilyGUID
	}
	sum := sha256.Sum256([]byte(fmt.Sprintf("%s|%d|%s|%d", in.cfg.Name, d.ID, d.Name, d.Created.UnixNano())))
	var g guid
	copy(g[:], sum[:16])
	return g
}

type restoreHistoryRow struct {
	ID          int64     `json:"id"`
	Date        time.Time `json:"date"`
	Database    string    `json:"database"`
	User        string    `json:"user"`
	BackupSetID int64     `json:"backup_set_id"`
	Type        string    `json:"type"`
	Replace     bool      `json:"replace"`
	Recovery    bool      `json:"recovery"`
	// StopAt is the STOPAT of a point-in-time RESTORE LOG (stop_at).
	StopAt time.Time `json:"stop_at,omitzero"`
}

type backupSetRow struct {
	ID         int64     `json:"id"`
	GUID       [16]byte  `json:"guid"`
	MediaGUID  [16]byte  `json:"media_guid"`
	Database   string    `json:"database"`
	Start      time.Time `json:"start"`
	Finish     time.Time `json:"finish"`
	FirstLSN   uint64    `json:"first_lsn"`
	LastLSN    uint64    `json:"last_lsn"`
	CopyOnly   bool      `json:"copy_only"`
	Checksums  bool      `json:"checksums"`
	Compressed bool      `json:"compressed"`
	Size       int64     `json:"size"`
	CompSize   int64     `json:"compressed_size"`
	Server     string    `json:"server"`
	// Name and Description are the BACKUP's NAME = and DESCRIPTION = options
	// (msdb.dbo.backupset.name, .description).
	Name        string `json:"name,omitempty"`
	Description string `json:"description,omitempty"`
	FamilyGUID  guid   `json:"family_guid"`
	// Type is backupset.type: "" or "D" a full database backup, "L" a log
	// backup; with the LSNs, the login, the devices and the chain flags of
	// backupset and backupmediafamily.
	Type              string   `json:"type,omitempty"`
	CheckpointLSN     uint64   `json:"checkpoint_lsn,omitempty"`
	DatabaseBackupLSN uint64   `json:"database_backup_lsn,omitempty"`
	User              string   `json:"user,omitempty"`
	Devices           []string `json:"devices,omitempty"`
	BeginsLogChain    bool     `json:"begins_log_chain,omitempty"`
	RecoveryModel     string   `json:"recovery_model,omitempty"`
	// Forks is the recovery path the set covers (forks.go); zero in
	// catalogs written before.
	Forks forkRange `json:"forks,omitzero"`
	// A differential's (type "I") base: differential_base_lsn and
	// differential_base_guid.
	DiffBaseLSN  uint64 `json:"differential_base_lsn,omitempty"`
	DiffBaseGUID guid   `json:"differential_base_guid,omitzero"`
	// SoftwareVersion is the build that wrote the set (the instance's
	// ProductVersion then): software_major_version, software_minor_version
	// and software_build_version; "" in catalogs written before (NULL).
	SoftwareVersion string `json:"software_version,omitempty"`
	// An encrypted set's key_algorithm, encryptor_thumbprint (hex) and
	// encryptor_type (backupenc.go).
	KeyAlgorithm        string `json:"key_algorithm,omitempty"`
	EncryptorThumbprint string `json:"encryptor_thumbprint,omitempty"`
	EncryptorType       string `json:"encryptor_type,omitempty"`
}

var systemDatabases = []*database{
	{ID: 1, Name: "master", system: true, UserAccess: "MULTI_USER"},
	{ID: 2, Name: "tempdb", system: true, UserAccess: "MULTI_USER"},
	{ID: 3, Name: "model", system: true, UserAccess: "MULTI_USER"},
	{ID: 4, Name: "msdb", system: true, UserAccess: "MULTI_USER"},
}

// New checks cfg and loads the catalog of DataDir (if any). The instance
// does not listen until Start.
func New(cfg Config) (*Instance, error) {
	if cfg.DataDir == "" {
		return nil, errors.New("sqlsim: Config.DataDir is empty; give a directory for the databases and the catalog")
	}
	if cfg.Name == "" {
		cfg.Name = "sqlsim"
	}
	if cfg.ListenAddr == "" {
		cfg.ListenAddr = "127.0.0.1:0"
	}
	if cfg.Logins == nil && len(cfg.Principals) == 0 {
		cfg.Logins = map[string]string{"sa": ""}
	}
	if err := checkServerConfig(&cfg); err != nil {
		return nil, err
	}
	if err := checkHostConfig(&cfg); err != nil {
		return nil, err
	}
	coll, err := parseCollation(cfg.Collation)
	if err != nil {
		return nil, err
	}
	cfg.Collation = coll.name
	if cfg.MemoryBudget <= 0 {
		cfg.MemoryBudget = 1 << 30
	}
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	abs, err := filepath.Abs(cfg.DataDir)
	if err != nil {
		return nil, fmt.Errorf("sqlsim: data directory %q: %w", cfg.DataDir, err)
	}
	cfg.DataDir = abs
	for _, d := range []string{cfg.DataDir, filepath.Join(cfg.DataDir, "data"), filepath.Join(cfg.DataDir, "backup")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, fmt.Errorf("sqlsim: create data directory: %w", err)
		}
	}
	in := &Instance{cfg: cfg, coll: coll, log: cfg.Logger.With(zap.String("server", cfg.Name)),
		sessions: map[uint16]*session{}, requests: map[*request]struct{}{}, crashed: make(chan struct{})}
	in.faults.init()
	if err := in.initLogins(); err != nil {
		return nil, err
	}
	if err := in.initTLS(); err != nil {
		return nil, err
	}
	for prefix, dir := range cfg.Shares {
		if err := in.addShare(prefix, dir); err != nil {
			return nil, err
		}
	}
	if err := in.loadCatalog(); err != nil {
		return nil, err
	}
	return in, nil
}

func normPrefix(p string) string {
	return strings.TrimRight(strings.ToLower(strings.ReplaceAll(p, "/", `\`)), `\`)
}

// AddShare maps a UNC (or drive) prefix to a local directory.
func (in *Instance) AddShare(prefix, dir string) error {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.addShare(prefix, dir)
}

func (in *Instance) addShare(prefix, dir string) error {
	if normPrefix(prefix) == "" {
		return fmt.Errorf("sqlsim: share prefix %q is empty; use e.g. \\\\bak01\\backup", prefix)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return fmt.Errorf("sqlsim: share %s: %w", prefix, err)
	}
	if st, err := os.Stat(abs); err != nil || !st.IsDir() {
		return fmt.Errorf("sqlsim: share %s maps to %q, which is not a directory; create it first", prefix, dir)
	}
	in.shares = append(in.shares, shareMap{prefix: normPrefix(prefix), raw: prefix, dir: abs, windows: !strings.HasPrefix(prefix, "/")})
	// Longest prefix first.
	sort.Slice(in.shares, func(i, j int) bool { return len(in.shares[i].prefix) > len(in.shares[j].prefix) })
	return nil
}

func (in *Instance) catalogPath() string { return filepath.Join(in.cfg.DataDir, "catalog.json") }

func (in *Instance) loadCatalog() error {
	in.cat = &catalogState{NextDBID: 5, NextRestoreID: 1, NextBackupSetID: 1, LSN: 37000000010400001}
	b, err := os.ReadFile(in.catalogPath())
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("sqlsim: read catalog: %w", err)
	}
	if err := json.Unmarshal(b, in.cat); err != nil {
		return fmt.Errorf("sqlsim: catalog %s is damaged (%v); remove it to start empty", in.catalogPath(), err)
	}
	return nil
}

// saveCatalog persists the catalog; in.mu must be held.
func (in *Instance) saveCatalog() error {
	b, err := json.MarshalIndent(in.cat, "", " ")
	if err != nil {
		return err
	}
	tmp := in.catalogPath() + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return fmt.Errorf("sqlsim: write catalog: %w", err)
	}
	return os.Rename(tmp, in.catalogPath())
}

// nextLSN hands out increasing LSNs; in.mu must be held.
func (in *Instance) nextLSN(n uint64) uint64 {
	in.cat.LSN += max(n, 1)
	return in.cat.LSN
}

// Start listens and serves. After Stop or Crash it can be called again: the
// databases and msdb history are read back from DataDir.
func (in *Instance) Start() error {
	in.ops.Wait() // work cut by a crash finishes unwinding first
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.running {
		return fmt.Errorf("sqlsim: instance %s is already running on %s", in.cfg.Name, in.addr)
	}
	addr := in.cfg.ListenAddr
	if in.addr != "" {
		addr = in.addr // a restart keeps the port
	}
	var ln net.Listener
	var err error
	for i := 0; i < 50; i++ { // the old port may linger briefly after a crash
		if ln, err = net.Listen("tcp", addr); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		return fmt.Errorf("sqlsim: listen on %s: %w", addr, err)
	}
	if err := in.loadCatalog(); err != nil {
		ln.Close()
		return err
	}
	in.recoverLogEndsLocked()
	in.ln, in.addr, in.running = ln, ln.Addr().String(), true
	in.crashed = make(chan struct{})
	v := in.versionInfo()
	opts := tds.Options{ServerName: in.cfg.Name, Major: uint8(in.cfg.MajorVersion), Minor: v.minor, Build: v.num}
	if in.tls != nil {
		opts.TLS, opts.TLSStrict = in.tls.cfg, in.cfg.TLS == "strict"
	}
	in.srv = tds.NewServer(in, opts, in.log)
	srv := in.srv
	go func() {
		if err := srv.Serve(ln); err != nil {
			in.log.Debug("serve ended", zap.Error(err))
		}
	}()
	in.commitLogs = nil // the catalog was read anew
	in.resumeWorkloadsLocked()
	in.log.Info("sqlsim listening", zap.String("addr", in.addr))
	return nil
}

// Addr is the listen address (host:port), known after Start.
func (in *Instance) Addr() string {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.addr
}

// DSN returns a go-mssqldb connection string for this instance: with
// Config.TLS, encrypted and trusting the instance's certificate (written to
// <DataDir>/sqlsim-cert.pem).
func (in *Instance) DSN(user, pass, db string) string {
	u := url.URL{Scheme: "sqlserver", User: url.UserPassword(user, pass), Host: in.Addr()}
	q := url.Values{}
	if db != "" {
		q.Set("database", db)
	}
	switch in.cfg.TLS {
	case "on":
		q.Set("encrypt", "true")
		q.Set("certificate", in.tls.certFile)
	case "strict":
		// TDS 8.0 always validates the certificate (go-mssqldb ignores
		// TrustServerCertificate with encrypt=strict): trust it as a CA file.
		q.Set("encrypt", "strict")
		q.Set("certificate", in.tls.certFile)
	default:
		q.Set("encrypt", "disable")
	}
	u.RawQuery = q.Encode()
	return u.String()
}

// Stop closes the listener and every connection, waits for running
// operations to end and keeps the state on disk.
func (in *Instance) Stop() error {
	in.mu.Lock()
	if !in.running {
		in.mu.Unlock()
		return nil
	}
	srv := in.srv
	in.running = false
	stopped := in.stopWorkloadsLocked()
	// Running statements end now (they would outlive their closed
	// connections otherwise, see client.go).
	for r := range in.requests {
		r.cancel()
	}
	in.mu.Unlock()
	waitWorkloads(stopped)
	err := srv.Close()
	in.ops.Wait()
	return err
}

// Crash emulates the host dying: every connection is dropped without a
// reply, new connections are refused, and running BACKUP/RESTORE/DBCC stop
// where they are (half-written stripes stay half-written). Start (or
// Restart) brings the instance back.
func (in *Instance) Crash() {
	srv := in.markCrashed("sqlsim crashed (fault injection)")
	if srv == nil {
		return
	}
	srv.DropConnections()
	srv.Close()
	in.ops.Wait()
}

// markCrashed flips a running instance to crashed (in-flight work sees it on
// its next step) and returns its TDS server to tear down; nil when it was not
// running.
func (in *Instance) markCrashed(msg string) *tds.Server {
	in.mu.Lock()
	if !in.running {
		in.mu.Unlock()
		return nil
	}
	in.running = false
	stopped := in.stopWorkloadsLocked()
	close(in.crashed)
	srv := in.srv
	in.mu.Unlock()
	waitWorkloads(stopped)
	in.log.Warn(msg)
	return srv
}

// Restart is Crash (if running) followed by Start on the same address.
func (in *Instance) Restart() error {
	in.Crash()
	return in.Start()
}

func (in *Instance) isCrashed() bool {
	in.mu.Lock()
	ch := in.crashed
	in.mu.Unlock()
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// lookupDB finds a database by name as SQL Server resolves it (by the
// server collation, trailing spaces ignored), system ones included.
func (in *Instance) lookupDB(name string) *database {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.lookupDBLocked(name)
}

func (in *Instance) lookupDBLocked(name string) *database {
	for _, d := range systemDatabases {
		if in.sameName(d.Name, name) {
			return d
		}
	}
	for _, d := range in.cat.Databases {
		if in.sameName(d.Name, name) {
			return d
		}
	}
	return nil
}

func (in *Instance) dbByID(id int) *database {
	in.mu.Lock()
	defer in.mu.Unlock()
	for _, d := range systemDatabases {
		if d.ID == id {
			return d
		}
	}
	for _, d := range in.cat.Databases {
		if d.ID == id {
			return d
		}
	}
	return nil
}

// allDatabases lists system and user databases by id, as copies (their
// State and UserAccess change under in.mu).
func (in *Instance) allDatabases() []database {
	in.mu.Lock()
	defer in.mu.Unlock()
	var out []database
	for _, d := range systemDatabases {
		out = append(out, *d)
	}
	for _, d := range in.cat.Databases {
		out = append(out, *d)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// newDatabaseIDLocked is the database_id a database created now gets: the
// lowest one no database has. SQL Server hands out the ids of dropped
// databases again, lowest gap first; Microsoft Learn does not say how ids
// are chosen (sys.databases: "ID of the database, unique within an instance
// of SQL Server"), practitioners observe the reuse (e.g. "Does DB_ID use
// identity column or Sequence?", jayanthkurup.com), so nothing may take a
// higher id for a newer database. in.mu is held.
func (in *Instance) newDatabaseIDLocked() int {
	used := map[int]bool{}
	for _, d := range systemDatabases {
		used[d.ID] = true
	}
	for _, d := range in.cat.Databases {
		used[d.ID] = true
	}
	id := 5
	for used[id] || in.pendingIDs[id] {
		id++
	}
	if id >= in.cat.NextDBID {
		in.cat.NextDBID = id + 1
	}
	return id
}

// restoring reports whether d is in the middle of a RESTORE.
func (in *Instance) restoring(d *database) bool {
	in.mu.Lock()
	defer in.mu.Unlock()
	return d.State == "RESTORING"
}

// CreateDatabase creates a database of real files (see DatabaseSpec).
func (in *Instance) CreateDatabase(spec DatabaseSpec) error {
	return in.createDatabase(spec, spec.Owner)
}

func removeFiles(files []dbFile) {
	for _, f := range files {
		os.Remove(f.Path)
	}
}

// DatabaseFiles returns the local paths of a database's files (data files
// first, then the log), for tests that damage them.
func (in *Instance) DatabaseFiles(db string) ([]string, error) {
	d := in.lookupDB(db)
	if d == nil || d.system {
		return nil, fmt.Errorf("sqlsim: database %q not found on %s", db, in.cfg.Name)
	}
	var out []string
	for _, f := range d.Files {
		out = append(out, f.Path)
	}
	return out, nil
}

// removeDatabase drops a database from the catalog and deletes its files;
// in.mu must be held.
func (in *Instance) removeDatabaseLocked(d *database) error {
	for i, x := range in.cat.Databases {
		if x == d {
			in.cat.Databases = append(in.cat.Databases[:i], in.cat.Databases[i+1:]...)
			break
		}
	}
	removeFiles(d.Files)
	return in.saveCatalog()
}

// readMetadata reads a database's tables from its primary file.
func (in *Instance) readMetadata(d *database) (*metadata, error) {
	in.metaMu.RLock()
	defer in.metaMu.RUnlock()
	return in.readMetadataLocked(d)
}

func (in *Instance) readMetadataLocked(d *database) (*metadata, error) {
	if d == nil || d.system {
		return &metadata{Schemas: []string{"dbo", "sys"}}, nil
	}
	md, err := readBoot(d.Files[0].Path)
	if err != nil {
		in.log.Error("metadata unreadable", zap.String("db", d.Name), zap.Error(err))
		return nil, sqlErr(824, 24, "SQL Server detected a logical consistency-based I/O error: incorrect checksum. It occurred during a read of page (1:1) in database ID %d at offset 0x00000000002000 in file '%s'. Complete a full database consistency check (DBCC CHECKDB).", d.ID, d.Files[0].Physical)
	}
	return md, nil
}

// updateMetadata applies fn to a database's metadata and writes it back.
func (in *Instance) updateMetadata(d *database, fn func(*metadata) error) error {
	in.metaMu.Lock()
	defer in.metaMu.Unlock()
	md, err := in.readMetadataLocked(d)
	if err != nil {
		return err
	}
	if err := fn(md); err != nil {
		return err
	}
	f, err := os.OpenFile(d.Files[0].Path, os.O_WRONLY, 0)
	if err != nil {
		return fmt.Errorf("open %s: %w", d.Files[0].Path, err)
	}
	defer f.Close()
	in.mu.Lock()
	lsn := in.nextLSN(1)
	in.mu.Unlock()
	return writeBoot(f, md, lsn)
}

func (in *Instance) serverProperty(name string) any {
	v := in.versionInfo()
	switch strings.ToLower(name) {
	case "productversion":
		return v.build
	case "productmajorversion":
		return itoa(int64(in.cfg.MajorVersion))
	case "productminorversion":
		return "0"
	case "productbuild":
		return itoa(int64(v.num))
	case "productlevel":
		return v.level
	case "productupdatelevel":
		if v.cu == "" {
			return nil
		}
		return v.cu
	case "edition":
		return in.editionName()
	case "engineedition":
		return in.engineEdition()
	case "machinename", "servername", "computernamephysicalnetbios":
		return in.cfg.Name
	case "collation":
		return in.cfg.Collation
	case "isclustered", "ishadrenabled", "isintegratedsecurityonly", "issingleuser":
		return int64(0)
	case "instancename":
		return nil
	}
	if v, ok := in.defaultPathProperty(strings.ToLower(name)); ok {
		return v
	}
	return nil
}

func (in *Instance) version() string {
	v := in.versionInfo()
	level := v.level
	if v.cu != "" {
		level += "-" + v.cu
	}
	ed := strings.ReplaceAll(in.editionName(), ": Core-based Licensing", "")
	return fmt.Sprintf("Microsoft SQL Server %d (%s) (%s) - %s (X64) \n\tNov  2 2024 00:00:00 \n\t"+
		"Copyright (C) %d Microsoft Corporation\n\t%s on Linux (backupcycle sqlsim emulator) <X64>", v.year, level, v.kb, v.build, v.year, ed)
}

// Login implements tds.Handler: the password, then the database the
// connection lands in (the requested one, else the login's default) must
// exist, be ONLINE and have a user for the login. SQL Server answers an
// unavailable requested database with 4060 and an unavailable default one
// with 4064, each followed by 18456
// (https://learn.microsoft.com/en-us/sql/relational-databases/errors-events/mssqlserver-4060-database-engine-error,
// https://learn.microsoft.com/en-us/sql/relational-databases/errors-events/mssqlserver-4064-database-engine-error).
// Messages are in the login's language (or the one LOGIN7 asked for).
func (in *Instance) Login(ctx context.Context, l tds.Login) (tds.Session, error) {
	if in.isCrashed() || in.refuseDue() {
		return nil, tds.ErrKillConnection
	}
	p := in.principal(l.User)
	lang := usEnglish
	if p != nil {
		lang, _ = languageByName(p.DefaultLanguage)
	}
	if asked, ok := languageByName(l.Language); ok && l.Language != "" {
		lang = asked
	}
	failed := sqlErr(18456, 14, "Login failed for user '%s'.", l.User)
	// A Windows login was authenticated by NTLM (tds.WindowsAccounts) and
	// has no password here; SQL Server authentication with its name fails.
	if p == nil || p.Windows != l.Windows || (!l.Windows && p.Password != l.Password) {
		in.log.Info("login failed", zap.String("user", l.User))
		return nil, localize(lang, failed)
	}
	db, requested := l.Database, l.Database != ""
	if !requested {
		db = p.DefaultDatabase
		if db == "" {
			db = "master"
		}
	}
	d := in.lookupDB(db)
	if d != nil && in.online(d) && in.dbUser(p, d) {
		if e := in.agAccess(d); e != nil {
			// A login into a secondary database that serves no reads is
			// refused with 976 (ag.go).
			return nil, localizeErrors(lang, tds.Errors{e, failed})
		}
	}
	if d == nil || !in.online(d) || !in.dbUser(p, d) {
		in.log.Info("login failed: database unavailable", zap.String("user", l.User), zap.String("db", db))
		first := sqlErr(4060, 11, "Cannot open database \"%s\" requested by the login. The login failed.", db)
		if !requested {
			first = sqlErr(4064, 11, "Cannot open user default database. Login failed.")
		}
		return nil, localizeErrors(lang, tds.Errors{first, failed})
	}
	s := &session{in: in, login: l, id: l.SPID, loginDB: d.Name, db: d.Name, lang: lang, loginLang: lang, connected: time.Now()}
	in.mu.Lock()
	in.sessions[l.SPID] = s
	in.mu.Unlock()
	return s, nil
}

// online reports whether sessions can use d: not RESTORING, OFFLINE or
// otherwise unavailable.
func (in *Instance) online(d *database) bool {
	in.mu.Lock()
	defer in.mu.Unlock()
	return d.State == "" || strings.EqualFold(d.State, "ONLINE")
}

var _ tds.Handler = (*Instance)(nil)
