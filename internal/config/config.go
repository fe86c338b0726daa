// Package config is backupcycle's YAML configuration: the Temporal connection,
// the SQL Server instances, the backup servers with their share paths, the
// databases and the policies they inherit.
//
// Load and Parse validate everything at once and report every problem with the
// file and line it comes from (config.yaml:12: ...). Passwords are never part
// of the configuration: it names an environment variable or a file
// (password_env / password_file), and activities resolve the reference with
// ResolveSecret at the moment they connect, so secrets never reach workflow
// inputs, histories or logs. The manifest keys (manifest_keys: key_env /
// key_file) are resolved the same way, when manifests are signed or read
// (ManifestKeyRing).
//
// Built-in defaults (applied after validation; every database inherits the
// `defaults:` section, which inherits these):
//
//	temporal:     address 127.0.0.1:7233, namespace default, task_queue backupcycle
//	sql_instances: encrypt mandatory, connect_timeout 30s, max_concurrent 1
//	availability_groups: availability_group = name, max_concurrent 1
//	backup_servers: max_concurrent 2, smb port 445, smb require_signing true, bandwidth_limit 0 (unlimited)
//	fleet:        max_concurrent 4, window 20h
//	stripes auto, compression true, buffer_count / max_transfer_size / block_size 0 (= SQL Server chooses),
//	copy_only true (false with owns_backup_chain true), sequence catalog, memory_budget 2GiB,
//	sql_host_wait {15s, 5m, 2h}, backup_server_wait {15s, 5m, 30m}, copy_wait {5s, 2m},
//	copy_deadline, backup_timeout, restore_timeout, checkdb_timeout: derived from the size;
//	heartbeat_timeout 4m,
//	retention {keep_verified 2, delete_failed_after 72h}, verify_name "{db}_verify", keep_verify_db false,
//	rpo 26h, rto 0 (none), log_backup none; with log_backup: log_proof nightly,
//	log_proof_lag 15m (standby) / 26h (nightly), standby_name "{db}_standby",
//	adopt_foreign_logs false, pit_proof {every 24h, checkdb false};
//	drill none (with drill: point latest, from any, checkdb false, max_age 2 x every,
//	name "{db}_drill", instance: the copy target's verify_instance); diff_backup none;
//	encryption none.
package config

import (
	"time"
)

// Config is a whole validated configuration, defaults applied.
type Config struct {
	Temporal     Temporal      `yaml:"temporal"`
	Defaults     Policy        `yaml:"defaults"` // what every database inherits key by key
	SQLInstances []SQLInstance `yaml:"sql_instances"`
	// AvailabilityGroups are Always On availability groups whose replicas
	// are configured instances: each availability database is backed up
	// once, by the group, on the replica SQL Server prefers.
	AvailabilityGroups []AvailabilityGroup `yaml:"availability_groups"`
	BackupServers      []BackupServer      `yaml:"backup_servers"`
	Databases          []Database          `yaml:"databases"`
	Fleet              Fleet               `yaml:"fleet"`
	// ManifestKeys authenticate the manifests and sequence files the
	// workers write on the backup servers (HMAC-SHA256): the first signs,
	// every one verifies. None: manifests are neither signed nor
	// authenticated, and preflight warns.
	ManifestKeys []ManifestKey `yaml:"manifest_keys"`
	// Evidence is the evidence ledger's keys; nil: no ledger is kept.
	Evidence *Evidence `yaml:"evidence"`

	// File is the name the configuration was loaded from (for messages).
	File string `yaml:"-"`
	// Warnings are settings that load but are likely wrong (e.g. a
	// heartbeat_timeout under 3 minutes), at their lines; `starter
	// preflight` and the worker's start-up check report them.
	Warnings []Error `yaml:"-"`
}

// SQLInstance is one SQL Server instance: a source of backups or a
// verification instance at a backup server (or both).
type SQLInstance struct {
	Name    string `yaml:"name"`    // referenced by databases[].instance and backup_servers[].verify_instance
	Address string `yaml:"address"` // host:port (port required; 1433 is SQL Server's default)
	// User is a SQL login, or DOMAIN\user for a Windows login (NTLM).
	User string `yaml:"user"`
	// Password is a reference: exactly one of password_env / password_file.
	Password SecretRef `yaml:",inline"`
	// Encrypt is the TLS mode, go-mssqldb's encrypt setting: strict (TDS 8.0,
	// TLS before anything else), mandatory (the whole session; the
	// default), optional (the login packet at least) or disable. Parse
	// normalises the older spellings true/false to mandatory/optional, and
	// warns of optional, disable and trust_server_certificate towards an
	// address that is not a loopback one.
	Encrypt                string `yaml:"encrypt"`
	TrustServerCertificate bool   `yaml:"trust_server_certificate"` // accept any certificate (test servers only)
	HostNameInCertificate  string `yaml:"hostname_in_certificate"`  // when the cert names another host
	// CAFile is a PEM file of the CA certificates the server's certificate
	// chains to (relative to the config file); default: the system's roots.
	CAFile         string        `yaml:"ca_file"`
	ConnectTimeout time.Duration `yaml:"connect_timeout"`
	MaxConcurrent  int           `yaml:"max_concurrent"` // cycles backing up from this host at once, whatever started them
	// Databases selects this instance's databases the way Ola Hallengren's
	// DatabaseBackup @Databases does: ALL_DATABASES, SYSTEM_DATABASES,
	// USER_DATABASES, names with * and ? wildcards, "-" to exclude; resolved
	// from sys.databases at run time (package selection). Empty: only the
	// databases listed under databases: are backed up.
	Databases []string `yaml:"databases"`
	// BackupServers and CopyTo are the rotation of the databases the
	// selection picks that have no databases: entry of their own (see
	// selection.DatabaseFor); an entry's own rotation always wins.
	BackupServers []string `yaml:"backup_servers"`
	CopyTo        string   `yaml:"copy_to"`
	// Platform is the operating system SQL Server runs on, PlatformWindows
	// or PlatformLinux; "" = detected when the cycle connects
	// (sys.dm_os_host_info). Declared, it is checked at load: SQL Server on
	// Linux cannot open UNC paths, so such an instance needs sql_paths.
	Platform string `yaml:"platform"`
}

// Platforms of SQLInstance.Platform.
const (
	PlatformWindows = "windows"
	PlatformLinux   = "linux"
)

// AvailabilityGroup is an Always On availability group. Its databases (a
// database on a replica whose sys.databases.replica_id is set) are planned,
// numbered and named by the group: Name takes the place of the instance's
// name in file names, manifests, workflow ids, schedules, status and
// metrics, so the same database on two replicas is one database with one
// sequence and one cycle at a time, whichever replica backs it up. Each
// cycle asks the replicas, in the order listed, which one
// sys.fn_hadr_backup_is_preferred_replica names, and backs up there. A
// database of a replica that is not in an availability group is that
// instance's, as without the group.
type AvailabilityGroup struct {
	// Name is the group's key, in the instances' namespace: unique ignoring
	// case among sql_instances[].name and availability_groups[].name.
	Name string `yaml:"name"`
	// AvailabilityGroup is the group's name on SQL Server
	// (sys.availability_groups.name); "" = Name. A replica's database in
	// another group is not this group's.
	AvailabilityGroup string `yaml:"availability_group"`
	// Replicas are the sql_instances that host its replicas, asked in this
	// order; an instance is a replica of one group at most.
	Replicas []string `yaml:"replicas"`
	// Aliases are other instance keys its databases' sets were written
	// under before the group was configured (a listener configured as an
	// instance); the replicas' names always count. Their sets are found,
	// resumed, counted for the sequence and retained as the group's.
	Aliases []string `yaml:"aliases"`
	// BackupServers and CopyTo are the rotation of its databases without a
	// databases: entry; empty = the replicas' sql_instances[].backup_servers,
	// which must then agree.
	BackupServers []string `yaml:"backup_servers"`
	CopyTo        string   `yaml:"copy_to"`
	// MaxConcurrent caps the group's cycles at once, whatever started them
	// (each backs up on one replica); default 1.
	MaxConcurrent int `yaml:"max_concurrent"`
}

// BackupServer is a file server that receives backups (over one or more NICs)
// and, at the remote site, hosts the copies the verification instance restores;
// or (kind: s3) an object store with Object Lock that receives an immutable
// copy of each verified set (databases' immutable_copy).
type BackupServer struct {
	Name string `yaml:"name"`
	// Kind is KindShare (the default: a directory SQL Server writes to and
	// the worker reaches at Location) or KindS3 (a bucket, in S3).
	Kind string `yaml:"kind"`
	// S3 is the bucket of a kind: s3 server.
	S3 *S3 `yaml:"s3"`
	// UNCPaths are the directories SQL Server writes the stripes to, one per NIC
	// (\\192.168.2.2\backup, \\192.168.3.2\backup), or an absolute path as SQL
	// Server sees it (/var/opt/mssql/backup/bak01 for SQL Server on Linux with a
	// mounted volume). Stripes are spread evenly over them.
	UNCPaths []string `yaml:"unc_paths"`
	// SQLPaths are an instance's own paths to the same directory, by
	// instance name, where it cannot use UNCPaths: SQL Server on Linux
	// reaches the share where it is mounted on its host (/mnt/bak01).
	// BACKUP uses the source instance's paths, RESTORE the verification
	// instance's (PathsFor).
	SQLPaths map[string][]string `yaml:"sql_paths"`
	// Location is how the worker reaches the same files: smb://host[:port]/share[/dir],
	// file:///path or a local path (relative paths are relative to the config file).
	Location string `yaml:"location"`
	// Loc is Location parsed (filled by Parse).
	Loc Location `yaml:"-"`
	// SMB holds the credentials and options used when Location is smb://.
	SMB *SMB `yaml:"smb"`
	// VerifyInstance is the SQL instance that restores and checks the copies
	// held by this server; required for every server that is a copy target.
	VerifyInstance string `yaml:"verify_instance"`
	RestoreDataDir string `yaml:"restore_data_dir"` // where the verify instance puts data files (its own path syntax)
	RestoreLogDir  string `yaml:"restore_log_dir"`  // and log files
	MaxConcurrent  int    `yaml:"max_concurrent"`   // cycles writing to / copying to this server at once
	// TaskQueue, when set, routes the activities that move this server's bytes
	// to a worker running on or next to it.
	TaskQueue string `yaml:"task_queue"`
	// BandwidthLimit caps what the copies write into this server, in bytes
	// per second, all of a worker's concurrent copies together; 0 = unlimited.
	BandwidthLimit Size `yaml:"bandwidth_limit"`
}

// Kinds of backup server (BackupServer.Kind).
const (
	KindShare = "share"
	KindS3    = "s3"
)

// S3 is an object-storage backup target: a bucket with Object Lock on an
// S3 server (AWS S3 or any server speaking its API).
type S3 struct {
	// Endpoint is the server's URL, https://host[:port]; "" is AWS S3 in
	// Region.
	Endpoint string `yaml:"endpoint"`
	Region   string `yaml:"region"` // default us-east-1
	Bucket   string `yaml:"bucket"`
	// Prefix is put before every object's name ("backupcycle/"); "" for
	// the bucket's root.
	Prefix string `yaml:"prefix"`
	// PathStyle addresses the bucket in the URL's path rather than its
	// host name; default true with an endpoint (most S3 servers other
	// than AWS need it), false for AWS.
	PathStyle   bool   `yaml:"path_style"`
	AccessKeyID string `yaml:"access_key_id"`
	// SecretAccessKey is a reference: exactly one of
	// secret_access_key_env / secret_access_key_file.
	SecretAccessKeyEnv  string `yaml:"secret_access_key_env"`
	SecretAccessKeyFile string `yaml:"secret_access_key_file"`
	// CAFile is a PEM file of the CA certificates the endpoint's
	// certificate chains to (relative to the config file); default: the
	// system's roots.
	CAFile string `yaml:"ca_file"`
	// LockMode is the Object Lock mode every object is written with:
	// LockCompliance (the default: nobody can delete a locked version
	// before its lock ends) or LockGovernance (a user with
	// s3:BypassGovernanceRetention can).
	LockMode string `yaml:"lock_mode"`
	// PartSize is the size of each part of a multipart upload (every
	// stripe above it is one); default DefaultPartSize. S3 takes parts of
	// 5 MiB to 5 GiB and at most 10,000 of them: a stripe above 10,000
	// parts is sent in larger ones.
	PartSize Size `yaml:"part_size"`
}

// Object Lock modes (S3.LockMode), as S3 spells them.
const (
	LockCompliance = "COMPLIANCE"
	LockGovernance = "GOVERNANCE"
)

// SMB is how the worker authenticates to a backup server's share.
type SMB struct {
	User     string    `yaml:"user"`
	Domain   string    `yaml:"domain"`
	Password SecretRef `yaml:",inline"` // password_env / password_file
	// RequireSigning makes the client insist on signed messages, as
	// Windows itself does by default since Windows 11 24H2; Parse sets it
	// unless the file says false (a warning towards another host).
	// Signing is always used when the server requires it.
	RequireSigning bool `yaml:"require_signing"`
	// Encrypt may only be false: SMB 3 encryption is the server's or the
	// share's setting, which the client follows whenever it is on.
	Encrypt bool `yaml:"encrypt"`
}

// Location is a parsed BackupServer.Location.
type Location struct {
	Scheme string // "smb" or "file"
	Host   string // smb: host name or IP
	Port   int    // smb: TCP port (445 unless given)
	Share  string // smb: share name
	Dir    string // smb: directory inside the share, slash-separated, "" for the share root
	Path   string // file: absolute local directory
}

// Database is one database to back up; it inherits every Policy key it does
// not set from Config.Defaults.
type Database struct {
	Name     string `yaml:"name"`     // database name on the instance (any characters SQL Server allows)
	Instance string `yaml:"instance"` // sql_instances[].name of the source
	// BackupServers is the rotation: cycle N writes to BackupServers[N mod len]
	// (seed 000, figure 2), and fails over to the next one.
	BackupServers []string `yaml:"backup_servers"`
	// CopyTo is the backup server that receives the remote copy and verifies it.
	// Empty: the next server in the rotation after the one backed up to.
	CopyTo       string        `yaml:"copy_to"`
	SanityChecks []SanityCheck `yaml:"sanity_checks"`
	Policy       `yaml:",inline"`
	// Entry is set when the database was resolved on its instance (package
	// selection): the name of the databases: entry it is backed up with,
	// when that is spelled otherwise than the database (an entry "sales"
	// for the database Sales of a case-insensitive instance; Name is then
	// "Sales"). Never read from the file.
	Entry string `yaml:"-"`
	// Aliases are the other instance keys the sets of a database of an
	// availability group (Instance is the group's name) may have been
	// written under: the group's replicas and aliases. Never read from the
	// file.
	Aliases []string `yaml:"-"`
	// Replica is the replica of Instance's group a cycle reads the
	// database from, as its plan chose it; "" for a database of an
	// instance. Never read from the file.
	Replica string `yaml:"-"`
}

// Fleet is how the nightly Fleet workflow runs the selected databases.
type Fleet struct {
	// MaxConcurrent caps the cycles running at once across the whole
	// configuration (each instance's and each backup server's own
	// max_concurrent still apply).
	MaxConcurrent int `yaml:"max_concurrent"`
	// Window is how long after its start the fleet run may start cycles;
	// databases not started by then are reported "not reached", and
	// cycles already running finish.
	Window time.Duration `yaml:"window"`
}

// Policy is the set of settings a database inherits from `defaults:`.
type Policy struct {
	// Stripes is the number of backup files, 1..64, or StripesAuto.
	Stripes         Stripes `yaml:"stripes"`
	Compression     bool    `yaml:"compression"`
	BufferCount     int     `yaml:"buffer_count"`      // BUFFERCOUNT; 0 = SQL Server chooses
	MaxTransferSize Size    `yaml:"max_transfer_size"` // MAXTRANSFERSIZE; 0 = SQL Server chooses (1 MiB)
	BlockSize       Size    `yaml:"block_size"`        // BLOCKSIZE; 0 = SQL Server chooses
	// CopyOnly takes COPY_ONLY full backups, which leave the differential
	// base and the log chain of other backup tools alone. It is true unless
	// OwnsBackupChain: then the cycle's full backups are the base the
	// database's differential backups depend on.
	CopyOnly        bool   `yaml:"copy_only"`
	OwnsBackupChain bool   `yaml:"owns_backup_chain"`
	Sequence        string `yaml:"sequence"` // SequenceCatalog, SequenceTable or SequenceUTC
	// MemoryBudget caps BUFFERCOUNT x MAXTRANSFERSIZE x stripes (seed 004: too
	// much fails the backup with "insufficient system memory").
	MemoryBudget     Size          `yaml:"memory_budget"`
	SQLHostWait      Backoff       `yaml:"sql_host_wait"`      // waiting for a dead SQL host
	BackupServerWait Backoff       `yaml:"backup_server_wait"` // waiting when no backup server is reachable
	CopyWait         Retry         `yaml:"copy_wait"`          // retrying a copy while the remote server is away
	CopyDeadline     time.Duration `yaml:"copy_deadline"`      // the copy step fails past this; 0 = derived from the size
	// Step timeouts: one attempt of the BACKUP, the RESTORE, CHECKDB (and
	// the sanity checks) is stopped past these, and a stalled activity
	// (dead worker) past HeartbeatTimeout. 0 = derived from the database's
	// size (see internal/plan.Timeouts).
	BackupTimeout    time.Duration `yaml:"backup_timeout"`
	RestoreTimeout   time.Duration `yaml:"restore_timeout"`
	CheckDBTimeout   time.Duration `yaml:"checkdb_timeout"`
	HeartbeatTimeout time.Duration `yaml:"heartbeat_timeout"`
	Retention        Retention     `yaml:"retention"`
	// VerifyName is the name of the restored copy on the verify instance;
	// {db}, {instance} and {seq} are replaced (VerifyDatabaseName).
	VerifyName   string `yaml:"verify_name"`
	KeepVerifyDB bool   `yaml:"keep_verify_db"` // keep the restored copy after a verified cycle
	// RPO is the recovery point objective: the newest verified set must
	// have been taken within it, else `starter status --from-manifests`
	// shows the database red and exits 1.
	RPO time.Duration `yaml:"rpo"`
	// RTO is the recovery time objective, compared with the measured restore
	// + CHECKDB time of the newest verified set; 0 = no objective.
	RTO time.Duration `yaml:"rto"`
	// LogBackup is the product's own log backups of the database (logs.go);
	// every 0: none.
	LogBackup LogBackup `yaml:"log_backup"`
	// LogProof is how the log backups are proven on the verification
	// instance: LogProofStandby or LogProofNightly; "" with log_backup:
	// LogProofNightly.
	LogProof string `yaml:"log_proof"`
	// LogProofLag is how long a log backup may wait to be proven before
	// status shows the database red; 0: 15m for standby, 26h for nightly.
	LogProofLag time.Duration `yaml:"log_proof_lag"`
	// StandbyName names the standby copy (log_proof: standby) on the
	// verification instance; {db} and {instance} are replaced.
	StandbyName string `yaml:"standby_name"`
	// AdoptForeignLogs copies another tool's log backup, when the worker
	// can read it, into the chain instead of leaving a hole in it.
	AdoptForeignLogs bool `yaml:"adopt_foreign_logs"`
	// PITProof is the point-in-time proof: a restore to a random point of
	// the proven window, WITH STOPAT.
	PITProof PITProof `yaml:"pit_proof"`
	// ImmutableCopy names a kind: s3 backup server that receives a copy of
	// every verified set, locked for Retention.ImmutableFor; "" = none.
	ImmutableCopy string `yaml:"immutable_copy"`
	// ImmutableWithin is how long a verified set may wait for its copy on
	// ImmutableCopy before status shows the database red; 0 =
	// DefaultImmutableWithin (Policy.ImmutableDeadline).
	ImmutableWithin time.Duration `yaml:"immutable_within"`
	// Drill is the scheduled recovery drill (drill.go); every 0: none.
	Drill Drill `yaml:"drill"`
	// DiffBackup is the product's own differential backups of the
	// database (diff.go); every 0: none.
	DiffBackup DiffBackup `yaml:"diff_backup"`
	// Encryption encrypts every backup of the database (encryption.go);
	// none when empty.
	Encryption Encryption `yaml:"encryption"`
}

// LogBackup is `log_backup:`.
type LogBackup struct {
	Every time.Duration `yaml:"every"` // a BACKUP LOG this often; 0: no log backups
}

// PITProof is `pit_proof:`.
type PITProof struct {
	Every   time.Duration `yaml:"every"`   // how often; 0 with log_backup: DefaultPITEvery
	CheckDB bool          `yaml:"checkdb"` // also DBCC CHECKDB the point-in-time copy
}

// Backoff is a bounded wait: retry after Initial, doubling up to MaxInterval,
// and give up once GiveUpAfter has passed.
type Backoff struct {
	Initial     time.Duration `yaml:"initial"`
	MaxInterval time.Duration `yaml:"max_interval"`
	GiveUpAfter time.Duration `yaml:"give_up_after"`
}

// Retry is a backoff whose deadline is set elsewhere (copy_deadline).
type Retry struct {
	Initial     time.Duration `yaml:"initial"`
	MaxInterval time.Duration `yaml:"max_interval"`
}

// Retention says which backup sets may be deleted. The newest verified set
// on any server is never deleted, whatever these say.
type Retention struct {
	KeepVerified      int           `yaml:"keep_verified"`       // verified sets kept per server (>= 1)
	DeleteFailedAfter time.Duration `yaml:"delete_failed_after"` // failed / abandoned sets older than this go
	// ImmutableFor is how long an immutable copy (immutable_copy) is
	// locked from its upload: at least keep_verified x rpo, the time the
	// backup servers keep a set; 0 = (keep_verified + 1) x rpo
	// (Policy.ImmutableLock).
	ImmutableFor time.Duration `yaml:"immutable_for"`
}

// SanityCheck is a query run against the restored copy, with exactly one
// expectation on the first column of its first row.
type SanityCheck struct {
	Name  string `yaml:"name"`
	Query string `yaml:"query"`
	// Expect is which of the three is set: ExpectEquals, ExpectAtLeast or
	// ExpectMaxAge (filled by Parse).
	Expect  string        `yaml:"-"`
	Equals  string        `yaml:"equals"`   // value, compared as text
	AtLeast int64         `yaml:"at_least"` // integer value >= this (row counts)
	MaxAge  time.Duration `yaml:"max_age"`  // a date/time value no older than this, measured from the backup's finish
	// GrantExecute are the functions ("schema.name" or "name", dbo) the
	// query calls: the sanity user of the copy (db_datareader only) is
	// granted EXECUTE on them.
	GrantExecute []string `yaml:"grant_execute"`
}

// Sanity check expectations.
const (
	ExpectEquals  = "equals"
	ExpectAtLeast = "at_least"
	ExpectMaxAge  = "max_age"
)

// Sequence methods.
const (
	// SequenceTable is the seed's DBBackup.Sequence table in the database itself
	// (created if absent): UPDATE ... SET @n = Number = Number + 1.
	SequenceTable = "table"
	// SequenceUTC uses the UTC time of the start, yyyymmddhhmmss as a number.
	SequenceUTC = "utc"
	// SequenceCatalog keeps the sequence beside the manifests: one more than
	// the highest number on any backup server of the database (sets and the
	// <instance>@<db>.sequence.json each server holds) and in the source
	// instance's msdb backup history. It writes nothing to the source
	// database, so it serves read-only databases and availability-group
	// secondaries.
	SequenceCatalog = "catalog"
)

// Stripes is a stripe count; StripesAuto lets the planner choose (2-4 files
// per NIC path, within the memory budget).
type Stripes int

// StripesAuto is `stripes: auto`.
const StripesAuto Stripes = 0

// MaxStripes is the most backup devices SQL Server accepts in one BACKUP.
const MaxStripes = 64

// Size is a number of bytes; YAML accepts 65536, 64KiB, 4MiB, 2GiB (binary)
// and 4MB (decimal, 4 000 000).
type Size int64
