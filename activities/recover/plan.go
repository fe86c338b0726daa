package recover

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.uber.org/zap"

	"github.com/backupcycle/backupcycle/activities"
	"github.com/backupcycle/backupcycle/internal/catalog"
	"github.com/backupcycle/backupcycle/internal/config"
	"github.com/backupcycle/backupcycle/internal/hostcheck"
	"github.com/backupcycle/backupcycle/internal/mssql"
	"github.com/backupcycle/backupcycle/internal/plan"
	"github.com/backupcycle/backupcycle/internal/recovery"
	"github.com/backupcycle/backupcycle/internal/storage"
	"github.com/backupcycle/backupcycle/internal/tsql"
)

// serverReadTimeout bounds the reading of one backup server's manifests
// and chain records: a server of a site that is gone must not hold the
// plan up for long.
const serverReadTimeout = 2 * time.Minute

// PlanRecover chooses the restore sequence that reaches the request's
// point from the manifests and chain records of every backup server of
// the database it can read (recovery.Choose), and checks on the target
// what would make the restore fail late: its version against the newest
// that wrote a backup of the plan (the full, a differential, each log),
// the TDE certificate of an encrypted database, the
// name free (or Replace), never the source database itself, the paths it
// reaches the backup servers by, the edition and the free space for the
// files' allocated size. Nothing is written anywhere. It returns the plan
// with the record of the target before the RESTORE (Plan.Intent), by
// which the later steps and their retries know the database they restore.
//
// With TailLog it is called twice: before the tail-log backup (Tail nil:
// everything is checked as for the newest point, the source still online,
// and the plan says it will be left RESTORING), and after it (the plan
// must end with the tail when it goes to the newest point). A restore over
// the source itself to its newest point without TailLog is refused
// (TailLogNeeded): what was committed after its newest log backup would be
// written over.
func (a *Activities) PlanRecover(ctx context.Context, pin PlanInput) (Plan, error) {
	in := pin.Request
	if err := in.Check(); err != nil {
		return Plan{}, activities.NonRetryable(activities.ErrInvalidConfig, err)
	}
	d := &a.Base.Cycle
	stop := d.KeepAlive(ctx)
	defer stop()
	db, err := d.Database(in.Instance, in.Database)
	if err != nil {
		return Plan{}, err
	}
	t := Target{Database: db.Name, Instance: db.Instance, To: in.ToInstance, Name: in.Name(), AsGiven: in.As != "", Replace: in.Replace}
	inst, overSource, err := a.checkTarget(t, db)
	if err != nil {
		return Plan{}, err
	}
	log := activities.Logger(a.Base, ctx).With(zap.String("db", db.Name), zap.String("instance", db.Instance),
		zap.String("step", StepPlan), zap.String("target", inst.Name), zap.String("name", t.Name))
	p := Plan{Database: db.Name, Instance: db.Instance, Target: inst.Name, Name: t.Name, OverSource: overSource}

	var servers []recovery.Server
	var unreachable []string
	if in.Staged != nil {
		servers, err = a.readStaged(ctx, db, *in.Staged)
	} else {
		servers, unreachable, err = a.readServers(ctx, db, in.Only, log)
	}
	if err != nil {
		return Plan{}, err
	}
	p.Unreachable = unreachable
	cat := recovery.Build(servers)
	p.Warnings = append(p.Warnings, cat.Ignored...)
	point := in.Point()
	if in.TailLog && pin.Tail == nil {
		// The tail is not taken yet: the point may lie past the logs held.
		point = recovery.Point{Latest: true}
	}
	p.Restore, err = recovery.Choose(cat, point)
	if err != nil {
		var u *recovery.Unreachable
		if errors.As(err, &u) {
			if len(unreachable) > 0 {
				err = fmt.Errorf("%w (not read: %s)", err, strings.Join(unreachable, "; "))
			}
			return Plan{}, activities.NonRetryable(activities.ErrRecoveryPointUnreachable, err)
		}
		return Plan{}, err
	}
	p.Warnings = append(p.Warnings, p.Restore.Warnings...)
	if in.Staged != nil {
		for i := range p.Restore.Steps {
			p.Restore.Steps[i].Dir = in.Staged.Dir
		}
	}
	if err := tailLog(in, pin.Tail, db, &p); err != nil {
		return Plan{}, err
	}
	full := p.Restore.Full()
	m := fullManifest(cat, full)
	p.BufferCount, p.MaxTransferSize = m.Options.BufferCount, m.Options.MaxTransferSize
	if h := m.Header; h != nil {
		p.SourceVersion, p.TDEThumbprint = h.SoftwareVersion, h.TDEThumbprint
		if h.Encryption != nil {
			p.EncryptorThumbprint, p.EncryptorType = h.Encryption.Thumbprint, h.Encryption.EncryptorType
		}
	}

	sqlDB, err := d.ConnectSQL(ctx, inst, "master")
	if err != nil {
		return Plan{}, err
	}
	defer sqlDB.Close()
	if err := a.checkReadable(ctx, sqlDB, db, inst.Name, m, &p); err != nil {
		return Plan{}, err
	}
	st, err := activities.DatabaseState(ctx, sqlDB, t.Name)
	if err != nil {
		return Plan{}, err
	}
	if st != nil {
		if !in.Replace {
			return Plan{}, activities.NonRetryable(activities.ErrTargetDatabaseExists, fmt.Errorf(
				"database %q exists on %s (%s, database_id %d, created %s): nothing was restored; give --replace to restore over it, "+
					"or --as another name", t.Name, inst.Name, st.State, st.ID, st.Created.Format(time.DateTime)))
		}
		p.Replaces = fmt.Sprintf("%s (%s, database_id %d, created %s)", t.Name, st.State, st.ID, st.Created.Format(time.DateTime))
	}
	if err := a.layout(ctx, sqlDB, in, inst, db, full, st, &p); err != nil {
		return Plan{}, err
	}
	if p.Intent, err = activities.CopyIntent(a.Base, ctx, sqlDB, inst.Name, t.Name, full.GUID, st); err != nil {
		return Plan{}, err
	}
	p.RestoreTimeout, p.LogTimeout, p.HeartbeatTimeout = timeouts(d, db, p)
	pred := Predict(db, cat, p.Restore)
	p.Predicted = &pred
	for _, w := range p.Warnings {
		log.Warn("recover plan: " + w)
	}
	log.Info("recover planned", zap.Int64("seq", full.Sequence), zap.Int("logs", len(p.Restore.Logs())), zap.Duration("predicted", pred.Restore()),
		zap.Time("recovery_point", p.Restore.RecoveryPoint), zap.Strings("unreachable", p.Unreachable))
	return p, nil
}

// tailLog applies the tail-log rules to the plan: over the source itself
// to its newest point without a tail is refused; with one, the plan says
// the source is (or will be) RESTORING, and a plan to the newest point
// taken after the tail ends with it.
func tailLog(in Request, tail *Tail, db *config.Database, p *Plan) error {
	r := &p.Restore
	if !in.TailLog {
		if p.OverSource && in.Latest {
			return activities.NonRetryable(activities.ErrTailLogNeeded, fmt.Errorf(
				"restoring over the source database %s to the newest point its backups reach (%s, %s) would write over every "+
					"transaction committed on it since: give --tail-log to back up the tail of its log first (BACKUP LOG WITH NORECOVERY, "+
					"which leaves %s RESTORING until the restore ends), or --as-of a point to say that an earlier one is meant; nothing was touched",
				db.ID(), r.RecoveryPoint.UTC().Format(time.RFC3339), r.RecoveryPointFrom, db.ID()))
		}
		return nil
	}
	if tail == nil {
		p.Warnings = append(p.Warnings, fmt.Sprintf("--tail-log: the source database %s is backed up WITH NORECOVERY first and left RESTORING: "+
			"no one can use it until a restore over it ends (this one, when it restores over it)", db.ID()))
		return nil
	}
	p.Warnings = append(p.Warnings, fmt.Sprintf("the source database %s was left RESTORING by its tail-log backup (log %d of chain %d on %s)",
		db.ID(), tail.Number, tail.Chain, tail.Server))
	if !in.Latest {
		return nil
	}
	logs := r.Logs()
	if n := len(logs); n == 0 || logs[n-1].Chain != tail.Chain || logs[n-1].Number != tail.Number {
		return activities.NonRetryable(activities.ErrRecoveryPointUnreachable, fmt.Errorf(
			"the tail-log backup of %s (log %d of chain %d on %s) is not where the restore of the newest point ends (%s): "+
				"its chain does not reach it from the newest verified full; the source is RESTORING: restore the tail by hand or recover to a point",
			db.ID(), tail.Number, tail.Chain, tail.Server, r.RecoveryPointFrom))
	}
	// The tail-log backup left the source RESTORING: nothing committed
	// after it, so its finish is reached, not only its start.
	r.RecoveryPoint, r.RecoveryPointBound, r.RecoveryPointFrom = logs[len(logs)-1].Finish, logs[len(logs)-1].Finish, "the tail-log backup's finish"
	return nil
}

// checkTarget is the target instance, after the refusal of the source
// database itself: a restore over it (same instance, or the same server
// under another name or as a replica of its availability group, and the
// same name) needs both Replace and the name given explicitly. overSource
// says the restore goes over the source.
func (a *Activities) checkTarget(t Target, db *config.Database) (inst *config.SQLInstance, overSource bool, err error) {
	d := &a.Base.Cycle
	inst, err = d.Instance(t.To)
	if err != nil {
		return nil, false, err
	}
	if !strings.EqualFold(t.Name, db.Name) {
		return inst, false, nil
	}
	sources := []string{db.Instance}
	if g, ok := d.AvailabilityGroup(db.Instance); ok {
		sources = append(sources, g.Replicas...)
	}
	for _, s := range sources {
		src, err := d.Instance(s)
		if err != nil {
			continue
		}
		if src.Name != inst.Name && !config.SameAddress(src.Address, inst.Address) {
			continue
		}
		if t.Replace && t.AsGiven {
			return inst, true, nil
		}
		return nil, false, activities.NonRetryable(activities.ErrTargetIsSource, fmt.Errorf(
			"%s on %s is the source database %s itself: a recover never restores over it unless asked twice: give both --replace "+
				"and --as %s (or recover under another name with --as, or to another instance with --to-instance)",
			t.Name, inst.Name, db.ID(), t.Name))
	}
	return inst, false, nil
}

// readServers reads the database's manifests and chain records on every
// backup server of its rotation and copy targets; a server that cannot be
// read (gone with its site, unreachable, misconfigured) is named in
// unreachable and the others serve. None readable is retryable.
func (a *Activities) readServers(ctx context.Context, db *config.Database, only []string, log *zap.Logger) ([]recovery.Server, []string, error) {
	d := &a.Base.Cycle
	keys, err := d.ManifestKeys()
	if err != nil {
		return nil, nil, err
	}
	var names []string
	for _, s := range db.BackupServers {
		for _, n := range []string{s, db.CopyTarget(s)} {
			if n != "" && !slices.Contains(names, n) {
				names = append(names, n)
			}
		}
	}
	var out []recovery.Server
	var unreachable []string
	for _, name := range names {
		if len(only) > 0 && !slices.Contains(only, name) {
			unreachable = append(unreachable, name+": not asked to read it")
			continue
		}
		s, err := a.readServer(ctx, db, name, keys)
		if err != nil {
			if ctx.Err() != nil {
				return nil, nil, ctx.Err()
			}
			log.Warn("backup server not read: the others serve", zap.String("server", name), zap.Error(err))
			unreachable = append(unreachable, fmt.Sprintf("%s: %s", name, message(err)))
			continue
		}
		out = append(out, s)
	}
	if len(out) == 0 {
		return nil, nil, activities.Retryable(activities.ErrNoBackupServerReachable, fmt.Errorf(
			"no backup server of %s could be read: %s", db.ID(), strings.Join(unreachable, "; ")))
	}
	return out, unreachable, nil
}

func (a *Activities) readServer(ctx context.Context, db *config.Database, name string, keys *catalog.Keys) (recovery.Server, error) {
	ctx, cancel := context.WithTimeout(ctx, serverReadTimeout)
	defer cancel()
	d := &a.Base.Cycle
	srv, err := d.Server(name)
	if err != nil {
		return recovery.Server{}, err
	}
	l, err := activities.ListManifests(a.Base, ctx, name, db)
	if err != nil {
		return recovery.Server{}, err
	}
	st, err := d.OpenServer(ctx, srv)
	if err != nil {
		return recovery.Server{}, err
	}
	defer st.Close()
	chains, err := catalog.ListChains(ctx, catalog.StorageFS{Storage: st}, keys, catalog.Of(db.Instance, db.Name))
	if err != nil {
		return recovery.Server{}, activities.StorageError(name, err)
	}
	srvr := recovery.Server{Name: name, Manifests: l.Manifests, Chains: chains.Records}
	// A drill record that is missing or unreadable measures nothing: the
	// prediction assumes what it would have measured.
	if r, err := catalog.LoadDrill(ctx, catalog.StorageFS{Storage: st}, keys, db.Instance, db.Name); err == nil && r != nil && r.Trusted() {
		srvr.Drills = r.Drills
	}
	return srvr, nil
}

// readStaged reads the manifests staged in s.Dir of s.Server (a drill
// from the immutable copy): signed like every manifest, checked with the
// manifest keys. The object store holds no log chain, so none is read.
func (a *Activities) readStaged(ctx context.Context, db *config.Database, s Staged) ([]recovery.Server, error) {
	d := &a.Base.Cycle
	if err := CheckStagingDir(s.Dir); err != nil {
		return nil, activities.NonRetryable(activities.ErrInvalidConfig, err)
	}
	if !slices.Contains(db.ServersAndTargets(), s.Server) {
		return nil, activities.NonRetryable(activities.ErrInvalidConfig, fmt.Errorf("staging server %s is not one of the backup servers of %s", s.Server, db.ID()))
	}
	keys, err := d.ManifestKeys()
	if err != nil {
		return nil, err
	}
	srv, err := d.Server(s.Server)
	if err != nil {
		return nil, err
	}
	st, err := d.OpenServer(ctx, srv)
	if err != nil {
		return nil, err
	}
	defer st.Close()
	sets := activities.SetsOf(db)
	l, err := catalog.List(ctx, catalog.StorageFS{Storage: storage.Under(st, s.Dir)}, keys, &sets)
	if err != nil {
		return nil, activities.StorageError(s.Server, err)
	}
	if len(l.Manifests) == 0 {
		return nil, activities.NonRetryable(activities.ErrRecoveryPointUnreachable, fmt.Errorf(
			"no manifest of %s staged in %s on %s that the manifest keys authenticate (%d unreadable)", db.ID(), s.Dir, s.Server, len(l.Broken)))
	}
	return []recovery.Server{{Name: s.Server, Manifests: HeldBy(l.Manifests, s.Server)}}, nil
}

// HeldBy are copies of manifests read from one place (a staging
// directory, an object store) saying that place holds their files: the
// servers a manifest records are where the set was written, not where
// these copies are.
func HeldBy(ms []*catalog.Manifest, server string) []*catalog.Manifest {
	out := make([]*catalog.Manifest, len(ms))
	for i, m := range ms {
		cp := *m
		cp.Servers = []string{server}
		out[i] = &cp
	}
	return out
}

// fullManifest is the manifest of the plan's full.
func fullManifest(c recovery.Catalog, full recovery.Step) *catalog.Manifest {
	for _, s := range c.Sets {
		if activities.SameGUID(s.GUID, full.GUID) {
			return s.Manifest
		}
	}
	return nil
}

// checkReadable refuses a target that cannot read a backup of the plan:
// an older SQL Server version than the newest that wrote one of them (a
// source patched or upgraded during the chain writes its later logs with
// its new build; or the 2019 CU16 format of a compressed TDE backup on an
// older CU), or a TDE or backup encryption certificate it lacks.
func (a *Activities) checkReadable(ctx context.Context, sqlDB *mssql.DB, db *config.Database, target string, m *catalog.Manifest, p *Plan) error {
	pv, err := sqlDB.ProductVersion(ctx)
	if err != nil {
		return activities.SQLError(err)
	}
	p.TargetVersion = pv
	dst, _ := plan.ParseVersion(pv)
	src, what := newestVersion(p.Restore.Steps)
	if full, _ := plan.ParseVersion(p.SourceVersion); !full.Known() {
		p.Warnings = append(p.Warnings, fmt.Sprintf("set %d records no SQL Server version: whether %s reads it is learnt by its RESTORE", m.Sequence, target))
	}
	if why, _ := plan.Incompatible(src, dst, m.Options.Compression && p.TDEThumbprint != "", target); why != "" {
		return activities.NonRetryable(activities.ErrInvalidConfig, fmt.Errorf(
			"%s cannot restore %s of %s: %s; recover to an instance of %s or newer (--to-instance), or upgrade %s", target, what,
			db.ID(), why, src.Product(), target))
	}
	encryptor := p.EncryptorThumbprint
	if p.EncryptorType == tsql.EncryptorAsymmetricKey {
		if err := holdsKey(ctx, sqlDB, db, target, m.Sequence, p); err != nil {
			return err
		}
		encryptor = ""
	}
	if p.TDEThumbprint == "" && encryptor == "" {
		return nil
	}
	certs, err := sqlDB.ServerCertificates(ctx)
	if err != nil {
		return activities.SQLError(err)
	}
	for _, need := range []struct{ thumbprint, how, kind, name string }{
		{p.TDEThumbprint, "is encrypted (TDE)", "TDE certificate", ""},
		{encryptor, fmt.Sprintf("was backed up WITH ENCRYPTION (set %d)", m.Sequence), "backup encryption certificate",
			db.Encryption.ServerCertificate},
	} {
		switch {
		case need.thumbprint == "" || certs.Find(need.thumbprint) != nil:
		case !certs.All:
			p.Warnings = append(p.Warnings, fmt.Sprintf("%s: the login does not see every certificate (it needs VIEW ANY DEFINITION), so whether it "+
				"holds the %s %s of %s is learnt by the RESTORE (error 33111 without it)", target, need.kind, need.thumbprint, db.ID()))
		default:
			return activities.NonRetryable(activities.ErrInvalidConfig, fmt.Errorf(
				"%s %s with the certificate of thumbprint %s, which %s does not hold in master: its RESTORE would fail with error 33111; %s",
				db.ID(), need.how, need.thumbprint, target, plan.TDECertificateFix(db.Instance, target, need.name)))
		}
	}
	return nil
}

// holdsKey refuses a target without the asymmetric key (of an EKM
// provider) the full was encrypted with: its RESTORE would fail with
// 33111 "Cannot find server asymmetric key with thumbprint".
func holdsKey(ctx context.Context, sqlDB *mssql.DB, db *config.Database, target string, seq int64, p *Plan) error {
	keys, err := sqlDB.ServerAsymmetricKeys(ctx)
	switch {
	case err != nil:
		return activities.SQLError(err)
	case keys.Find(p.EncryptorThumbprint) != nil:
		return nil
	case !keys.All:
		p.Warnings = append(p.Warnings, fmt.Sprintf("%s: the login does not see every asymmetric key (it needs VIEW ANY DEFINITION), so whether it "+
			"holds the backup encryption key %s of %s is learnt by the RESTORE (error 33111 without it)", target, p.EncryptorThumbprint, db.ID()))
		return nil
	}
	name := db.Encryption.ServerAsymmetricKey
	if name == "" {
		name = "<key>"
	}
	return activities.NonRetryable(activities.ErrInvalidConfig, fmt.Errorf(
		"%s was backed up WITH ENCRYPTION (set %d) with the asymmetric key of thumbprint %s, which %s does not hold in master: its RESTORE "+
			"would fail with error 33111; %s", db.ID(), seq, p.EncryptorThumbprint, target, plan.ProviderKeyFix(target, name)))
}

// newestVersion is the newest SQL Server build that wrote a step of the
// plan (its full, differential or a log), and which step; unknown when
// none records one.
func newestVersion(steps []recovery.Step) (plan.Version, string) {
	var newest plan.Version
	what := ""
	for _, s := range steps {
		if v, _ := plan.ParseVersion(s.SoftwareVersion); v.Known() && (!newest.Known() || newest.Older(v)) {
			newest, what = v, s.Name()
		}
	}
	if what == "" && len(steps) > 0 {
		what = steps[0].Name()
	}
	return newest, what
}

// layout decides where the files go and checks the target can hold them:
// the paths it reaches the backup servers by, the restore's MOVE clauses
// from RESTORE FILELISTONLY read there, the edition and features, the
// directories and their free space (the files' allocated size; a
// database replaced gives its space back).
func (a *Activities) layout(ctx context.Context, sqlDB *mssql.DB, in Request, inst *config.SQLInstance, db *config.Database,
	full recovery.Step, st *mssql.DatabaseState, p *Plan) error {
	d := &a.Base.Cycle
	p.DataDir, p.LogDir, p.DirsFrom = in.DataDir, in.LogDir, "the request"
	if p.DataDir == "" || p.LogDir == "" {
		data, logDir, err := sqlDB.DefaultPaths(ctx)
		if err != nil {
			return activities.SQLError(err)
		}
		if p.DataDir == "" {
			p.DataDir = data
		}
		if p.LogDir == "" {
			p.LogDir = logDir
		}
		p.DirsFrom = "SERVERPROPERTY('InstanceDefaultDataPath') and ('InstanceDefaultLogPath')"
	}
	if p.DataDir == "" || p.LogDir == "" {
		return activities.NonRetryable(activities.ErrInvalidConfig, fmt.Errorf(
			"%s reports no default data or log directory: give --data-dir and --log-dir, as the instance sees them", inst.Name))
	}
	facts, factsErr := hostcheck.Read(ctx, sqlDB)
	var files []mssql.FileListEntry
	var lastErr error
	for _, name := range full.Servers {
		srv, err := d.Server(name)
		if err != nil {
			return err
		}
		paths := srv.PathsFor(inst.Name)
		if factsErr == nil {
			if c := hostcheck.Paths(inst.Name, facts, srv.Name, srv.PathsKey(inst.Name), paths); c.Problem {
				lastErr = activities.NonRetryable(activities.ErrInvalidConfig, errors.New(c.Error()))
				continue
			}
		}
		q, err := tsql.RestoreFileListOnly(diskPaths(paths, full.Dir, full.Files))
		if err != nil {
			return activities.NonRetryable(activities.ErrInvalidConfig, err)
		}
		if files, err = sqlDB.FileListOnly(ctx, q); err == nil {
			break
		}
		lastErr = activities.SQLError(fmt.Errorf("RESTORE FILELISTONLY of set %d through %s on %s: %w", full.Sequence, srv.Name, inst.Name, err))
	}
	if files == nil {
		return lastErr
	}
	rows := make([]tsql.FileListRow, len(files))
	need := hostcheck.Need{Database: db.ID()}
	for i, f := range files {
		rows[i] = tsql.FileListRow{LogicalName: f.LogicalName, PhysicalName: f.PhysicalName, Type: f.Type, FileID: f.FileID}
		switch strings.ToUpper(f.Type) {
		case "L":
			p.LogBytes += f.Size
		case "S":
			need.Filestream = true
			p.DataBytes += f.Size
		default:
			need.DataBytes += f.Size
			p.DataBytes += f.Size
		}
	}
	need.LogBytes = p.LogBytes
	moves, err := tsql.Moves(p.Name, rows, p.DataDir, p.LogDir)
	if err != nil {
		return activities.NonRetryable(activities.ErrInvalidConfig, fmt.Errorf("%s: %w", inst.Name, err))
	}
	p.Moves = moves
	if factsErr != nil {
		p.Warnings = append(p.Warnings, fmt.Sprintf("what %s can host was not read (%v): its RESTORE checks it", inst.Name, factsErr))
		return nil
	}
	findings := hostcheck.Features(inst.Name, facts, need)
	for _, k := range []struct{ key, dir string }{{"data_dir", p.DataDir}, {"log_dir", p.LogDir}} {
		if k.key == "log_dir" && k.dir == p.DataDir {
			continue
		}
		findings = append(findings, hostcheck.Directory(inst.Name, k.key, k.dir, hostcheck.ReadDir(ctx, sqlDB, facts, k.dir)))
	}
	if vols, err := hostcheck.ReadVolumes(ctx, sqlDB); err == nil {
		replacing := ""
		if st != nil {
			replacing = st.Name
		}
		findings = append(findings, hostcheck.Space(inst.Name, []hostcheck.DirNeed{
			{Key: "data_dir", Dir: p.DataDir, Bytes: p.DataBytes, What: "data files of " + p.Name},
			{Key: "log_dir", Dir: p.LogDir, Bytes: p.LogBytes, What: "log of " + p.Name},
		}, vols, replacing)...)
	} else {
		p.Warnings = append(p.Warnings, fmt.Sprintf("the free space of %s's volumes was not read (%v): its RESTORE checks it (3257)", inst.Name, err))
	}
	if c, ok := hostcheck.FirstProblem(findings); ok {
		err := fmt.Errorf("%s cannot hold %s restored from set %d: %s", inst.Name, p.Name, full.Sequence, c.Error())
		if c.Full {
			return activities.NonRetryable(activities.ErrTargetInstanceFull, err)
		}
		return activities.NonRetryable(activities.ErrInvalidConfig, err)
	}
	return nil
}

// diskPaths are the paths of files as SQL Server reaches them through
// paths (a backup server's NIC paths, round robin as the stripes were
// written: tsql.Layout), in its directory dir ("" for the sets' own).
func diskPaths(paths []string, dir string, files []recovery.File) []string {
	out := make([]string, len(files))
	for i, f := range files {
		p := paths[i%len(paths)]
		if dir != "" {
			for _, part := range strings.Split(dir, "/") {
				p = tsql.JoinPath(p, part)
			}
		}
		out[i] = tsql.JoinPath(p, f.Name)
	}
	return out
}

// timeouts of the restoring steps: the configured restore_timeout and
// heartbeat_timeout, else from the size at a modest rate (100 MB/s) with
// the cycle's margins (3 x expected + 30 min; a log: + 10 min).
func timeouts(d *activities.CycleDeps, db *config.Database, p Plan) (restore, logT, hb time.Duration) {
	const rate = 100e6
	expected := func(b int64) time.Duration { return time.Duration(float64(b) / rate * float64(time.Second)) }
	restore = db.RestoreTimeout
	if restore == 0 {
		restore = 3*expected(p.DataBytes+p.LogBytes+p.Restore.Full().Bytes) + 30*time.Minute
	}
	var largest int64
	for _, l := range p.Restore.Logs() {
		largest = max(largest, l.Bytes)
	}
	logT = 3*expected(largest) + 10*time.Minute
	hb = db.HeartbeatTimeout
	if hb == 0 {
		hb = d.HeartbeatTimeout
	}
	if hb == 0 {
		hb = 4 * time.Minute
	}
	return restore, logT, hb
}

// message is what an error says, without Temporal's type and cause
// suffixes (an ApplicationError's message already holds its cause).
func message(err error) string {
	var appErr *temporal.ApplicationError
	if errors.As(err, &appErr) {
		return appErr.Message()
	}
	return err.Error()
}

// ReadCatalog is what a recover of db would choose from: the backups on
// every backup server of db it can read (only those in only, when given),
// and the servers not read, each with why. A drill picks its point from it.
// A function, not a method: every exported method of Activities is
// registered as an activity.
func ReadCatalog(ctx context.Context, a *Activities, db *config.Database, only []string, log *zap.Logger) (recovery.Catalog, []string, error) {
	servers, unreachable, err := a.readServers(ctx, db, only, log)
	if err != nil {
		return recovery.Catalog{}, nil, err
	}
	return recovery.Build(servers), unreachable, nil
}
