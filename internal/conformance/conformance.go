// Package conformance checks, on a real SQL Server, the behaviour the
// product rests on where Microsoft's documentation does not settle it:
// what LastGoodCheckDbTime says after a restore and after a CHECKDB, the
// phases DBCC CHECKDB shows in sys.dm_exec_requests, the batch text
// sys.dm_exec_sql_text returns, when create_date and restore_date are
// stamped, whether a BACKUP whose client vanished runs on, how the drop of
// a RESTORING copy goes, the clock RESTORE HEADERONLY's dates are on, the
// errors of a file that is not a backup or does not exist, and the
// recovery forks of the log backup after a restore.
//
// It works on a scratch database of its own (CREATE DATABASE: its creator
// owns it), backs it up to a backup server, restores it on the
// verification instance, and removes everything it created, also when it
// fails or is interrupted; what it could not remove it names. `starter
// conformance` runs it; each probe calls the product's own code where the
// assumption is encoded (tsql's statements and markers, mssql.Find,
// hostcheck.Probe, activities.CheckDBBaseline.CleanSince), so a probe that
// holds on a server says the product holds there.
package conformance

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/backupcycle/backupcycle/internal/config"
	"github.com/backupcycle/backupcycle/internal/mssql"
	"github.com/backupcycle/backupcycle/internal/plan"
	"github.com/backupcycle/backupcycle/internal/storage"
	"github.com/backupcycle/backupcycle/internal/tsql"
)

// DefaultFill is how much the scratch database is filled with: enough that
// a BACKUP, a RESTORE and a CHECKDB of it last a few seconds on common
// hardware, so that they can be watched while they run.
const DefaultFill = 256 << 20

// ScratchPrefix starts the name of every database and file a run creates.
const ScratchPrefix = "backupcycle_conformance_"

// Options say where to probe and how.
type Options struct {
	Config *config.Config
	// Instance is the source instance (sql_instances name): the scratch
	// database is created and backed up there.
	Instance string
	// VerifyInstance restores the copies; "" is Instance (the copies get
	// other names).
	VerifyInstance string
	// Server is the backup server the BACKUPs write to and the RESTOREs
	// read from; "" picks one whose verify_instance is VerifyInstance, else
	// the first.
	Server string
	// FillBytes is the data the scratch database gets (rows of one page);
	// 0 is DefaultFill.
	FillBytes int64
	// Poll is how often running statements are looked at; default 50 ms.
	Poll time.Duration
	// VanishWait bounds the wait for the BACKUP whose client vanished;
	// default 30 minutes.
	VanishWait time.Duration
	// OpenSQL connects to an instance (to master); default: the configured
	// credentials. OpenStorage opens a backup server's location.
	OpenSQL     func(ctx context.Context, inst *config.SQLInstance) (*mssql.DB, error)
	OpenStorage func(ctx context.Context, srv *config.BackupServer) (storage.Storage, error)
}

// Plan is what a run will create, decided before it connects anywhere.
type Plan struct {
	Instance, VerifyInstance, Server string
	// Scratch is the database created on Instance; Copy and Restoring are
	// restored from its backup on VerifyInstance (Restoring WITH
	// NORECOVERY, then dropped by the product's drop statement).
	Scratch, Copy, Restoring string
	FillBytes, FillRows      int64
	// Backup and VanishBackup are the files written on Server; ForkBackup
	// and ForkLogs those of the log chain's probe (forkprobe.go),
	// ForkDiff the differential on ForkBackup (the differential base's).
	Backup, VanishBackup string
	ForkBackup           string
	ForkLogs             [2]string
	ForkDiff             string
	// EncBackup is the backup taken WITH ENCRYPTION (encprobe.go) with
	// Encryption, the encryption: of a database of Instance; "" when none
	// has one.
	EncBackup  string             `json:"-"`
	Encryption *config.Encryption `json:"-"`
	// SourcePath and VerifyPath are Server's directory as Instance and
	// VerifyInstance reach it; Location as the worker (this command) does.
	SourcePaths []string
	VerifyPath  string
	Location    string
	// DataDir and LogDir are where VerifyInstance restores the copies; ""
	// is beside the scratch database's own files (VerifyInstance is
	// Instance and no backup server gives it restore directories).
	DataDir, LogDir string

	o            Options
	inst, verify *config.SQLInstance
	srv          *config.BackupServer
}

// NewPlan checks o against the configuration and names what a run will
// create, with a random suffix.
func NewPlan(o Options) (*Plan, error) {
	cfg := o.Config
	if cfg == nil {
		return nil, fmt.Errorf("conformance: no configuration given")
	}
	if o.FillBytes <= 0 {
		o.FillBytes = DefaultFill
	}
	if o.Poll <= 0 {
		o.Poll = 50 * time.Millisecond
	}
	if o.VanishWait <= 0 {
		o.VanishWait = 30 * time.Minute
	}
	instance := func(flag, name string) (*config.SQLInstance, error) {
		if in, ok := cfg.SQLInstance(name); ok {
			return in, nil
		}
		var have []string
		for _, in := range cfg.SQLInstances {
			have = append(have, in.Name)
		}
		return nil, fmt.Errorf("%s %q is not in sql_instances of %s (configured: %s)", flag, name, cfg.File, strings.Join(have, ", "))
	}
	p := &Plan{o: o}
	var err error
	if p.inst, err = instance("--instance", o.Instance); err != nil {
		return nil, err
	}
	p.verify = p.inst
	if o.VerifyInstance != "" {
		if p.verify, err = instance("--verify-instance", o.VerifyInstance); err != nil {
			return nil, err
		}
	}
	if p.srv, err = pickServer(cfg, o.Server, p.verify.Name); err != nil {
		return nil, err
	}
	p.Instance, p.VerifyInstance, p.Server = p.inst.Name, p.verify.Name, p.srv.Name
	p.SourcePaths = p.srv.PathsFor(p.inst.Name)
	vp := p.srv.PathsFor(p.verify.Name)
	if len(p.SourcePaths) == 0 || len(vp) == 0 {
		return nil, fmt.Errorf("backup server %s has no unc_paths (or sql_paths) for %s and %s", p.srv.Name, p.inst.Name, p.verify.Name)
	}
	p.VerifyPath, p.Location = vp[0], p.srv.Loc.String()
	p.DataDir, p.LogDir = restoreDirs(cfg, p.srv, p.verify.Name)
	if p.DataDir == "" && p.verify != p.inst {
		return nil, fmt.Errorf("--verify-instance %s restores no backup server's copies in %s (no backup server names it verify_instance), "+
			"so its restore_data_dir and restore_log_dir are unknown: give an instance that does, or leave --verify-instance out", p.verify.Name, cfg.File)
	}
	var raw [4]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return nil, err
	}
	p.Scratch = ScratchPrefix + hex.EncodeToString(raw[:])
	p.Copy, p.Restoring = p.Scratch+"_copy", p.Scratch+"_restoring"
	p.Backup, p.VanishBackup = p.Scratch+".bak", p.Scratch+"_vanish.bak"
	p.ForkBackup, p.ForkLogs = p.Scratch+"_fork.bak", [2]string{p.Scratch + "_fork_1.trn", p.Scratch + "_fork_2.trn"}
	p.ForkDiff = p.Scratch + "_fork.dif"
	if p.Encryption = encryptionOf(cfg, p.inst.Name); p.Encryption != nil {
		p.EncBackup = p.Scratch + "_enc.bak"
	}
	p.FillBytes, p.FillRows = o.FillBytes, fillRows(o.FillBytes)
	return p, nil
}

// fillRows is the power of two of rows of one page closest below bytes
// (at least one): the fill doubles the table.
func fillRows(bytes int64) int64 {
	rows := int64(1)
	for rows*2*tsql.FillRowBytes <= bytes {
		rows *= 2
	}
	return rows
}

// pickServer is the backup server named, else the first whose copies
// verify restores, else the first.
func pickServer(cfg *config.Config, name, verify string) (*config.BackupServer, error) {
	if name != "" {
		if srv, ok := cfg.BackupServer(name); ok {
			return srv, nil
		}
		return nil, fmt.Errorf("--server %q is not in backup_servers of %s", name, cfg.File)
	}
	if len(cfg.BackupServers) == 0 {
		return nil, fmt.Errorf("%s configures no backup_servers: the probes need one to back up to", cfg.File)
	}
	for i := range cfg.BackupServers {
		if cfg.BackupServers[i].VerifyInstance == verify {
			return &cfg.BackupServers[i], nil
		}
	}
	return &cfg.BackupServers[0], nil
}

// restoreDirs are verify's restore directories: srv's when verify restores
// its copies, else another server's that names verify, else "".
func restoreDirs(cfg *config.Config, srv *config.BackupServer, verify string) (string, string) {
	servers := []*config.BackupServer{srv}
	for i := range cfg.BackupServers {
		servers = append(servers, &cfg.BackupServers[i])
	}
	for _, b := range servers {
		if b.VerifyInstance == verify && b.RestoreDataDir != "" && b.RestoreLogDir != "" {
			return b.RestoreDataDir, b.RestoreLogDir
		}
	}
	return "", ""
}

// sourcePath is file on the server as the source instance reaches it.
func (p *Plan) sourcePath(file string) string { return tsql.JoinPath(p.SourcePaths[0], file) }

// verifyPath is file on the server as the verification instance reaches it.
func (p *Plan) verifyPath(file string) string { return tsql.JoinPath(p.VerifyPath, file) }

// setName is the NAME = of the run's backups: not a name of the product's
// own sets (tsql.IsBackupSetName), so no guard takes the copies for a
// cycle's.
func (p *Plan) setName() string { return strings.ReplaceAll(p.Scratch, "_", " ") }

// WriteText prints what the run will create and what it needs, before it
// asks to go ahead.
func (p *Plan) WriteText(w io.Writer) error {
	fill := plan.FormatBytes(p.FillRows * tsql.FillRowBytes)
	var b strings.Builder
	fmt.Fprintf(&b, "starter conformance checks what the product assumes about SQL Server on %s", p.Instance)
	if p.VerifyInstance != p.Instance {
		fmt.Fprintf(&b, " and %s", p.VerifyInstance)
	}
	fmt.Fprintf(&b, ". It will create, and remove when it ends (also when it fails or is interrupted):\n")
	fmt.Fprintf(&b, "  on SQL instance %s: database %s (CREATE DATABASE, in the instance's default data and log directories), "+
		"filled with %s (table dbo.%s: %d rows of one page) and an indexed view (dbo.%s)\n",
		p.Instance, p.Scratch, fill, tsql.FillTable, p.FillRows, tsql.FillView)
	fmt.Fprintf(&b, "  on backup server %s (%s): two backups of it, %s and %s, about %s each, written by %s's SQL Server as %s; "+
		"and a 4 KiB probe file, removed at once\n", p.Server, p.Location, p.Backup, p.VanishBackup, fill, p.Instance, p.sourcePath(p.Backup))
	fmt.Fprintf(&b, "  for the log chain's probe, last: %s set to the FULL recovery model, a full backup %s, a differential %s on it and "+
		"two log backups %s and %s on %s, and %s restored over itself from that full backup between them (RESTORE ... WITH REPLACE)\n",
		p.Scratch, p.ForkBackup, p.ForkDiff, p.ForkLogs[0], p.ForkLogs[1], p.Server, p.Scratch)
	if p.EncBackup != "" {
		typ, name := p.Encryption.Backup().Encryptor()
		fmt.Fprintf(&b, "  on backup server %s: a backup %s of %s WITH ENCRYPTION (ALGORITHM = %s, SERVER %s = %s), as the "+
			"configured encryption: takes them (the login needs VIEW DEFINITION on it)\n", p.Server, p.EncBackup, p.Scratch,
			p.Encryption.Algorithm, typ, name)
	}
	where := "beside the files of " + p.Scratch
	if p.DataDir != "" {
		where = "in " + p.DataDir + " and " + p.LogDir
	}
	fmt.Fprintf(&b, "  on SQL instance %s: databases %s and %s, restored from %s (read as %s), %s\n",
		p.VerifyInstance, p.Copy, p.Restoring, p.Backup, p.verifyPath(p.Backup), where)
	logins := fmt.Sprintf("login %s", p.inst.User)
	if p.VerifyInstance != p.Instance {
		logins = fmt.Sprintf("logins %s (%s) and %s (%s)", p.inst.User, p.Instance, p.verify.User, p.VerifyInstance)
	}
	fmt.Fprintf(&b, "It connects as the configured %s. It needs CREATE DATABASE on both instances (it owns what it creates, so "+
		"nothing more to back up, check, restore and drop it), VIEW SERVER STATE (SQL Server 2022: VIEW SERVER PERFORMANCE STATE) "+
		"to watch its own statements, SELECT on msdb.dbo.restorehistory and backupset of %s (`starter preflight` checks these), "+
		"and write and read access of the SQL Server service accounts to the backup server. Without CREATE DATABASE or the "+
		"backup server it stops at once; without the others the probes that need them are inconclusive and say so. It touches no other database, and sends KILL only to its own BACKUP or RESTORE should that "+
		"still run two minutes after an interrupt. msdb keeps the backup and restore history of the databases, as for any backup. "+
		"It takes a few minutes.\n", logins, p.VerifyInstance)
	_, err := io.WriteString(w, b.String())
	return err
}

// created lists what the run may have created, for the cleanup.
type created struct {
	dbs   []createdDB
	files []string
}

type createdDB struct {
	instance string // Plan.Instance or Plan.VerifyInstance
	name     string
}

func (c *created) db(instance, name string) {
	if !slices.Contains(c.dbs, createdDB{instance, name}) {
		c.dbs = append(c.dbs, createdDB{instance, name})
	}
}

func (c *created) file(name string) {
	if !slices.Contains(c.files, name) {
		c.files = append(c.files, name)
	}
}

// openSQL connects with the configured credentials, to master.
func openSQL(ctx context.Context, inst *config.SQLInstance) (*mssql.DB, error) {
	return mssql.OpenInstance(ctx, inst, "master", "backupcycle conformance")
}
