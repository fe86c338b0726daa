package client

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf16"

	"github.com/backupcycle/backupcycle/activities"
	"github.com/backupcycle/backupcycle/internal/catalog"
	"github.com/backupcycle/backupcycle/internal/config"
	"github.com/backupcycle/backupcycle/internal/plan"
	"github.com/backupcycle/backupcycle/internal/selection"
	"github.com/backupcycle/backupcycle/internal/status"
	"github.com/backupcycle/backupcycle/internal/tsql"
	"github.com/backupcycle/backupcycle/workflows"
)

// Assumptions are the throughputs (MB/s = MiB/s, per unit) and counts the
// time estimates rest on; measure them on the real hardware (seed 000,
// "Calculating the Time...") and pass them in. NIC counts are not here: they
// are the UNC paths of each backup server in the configuration.
type Assumptions struct {
	NICMBps            float64 // per NIC path
	BackupLUNReadMBps  float64 // backup server LUN, sequential read
	BackupLUNWriteMBps float64 // backup server LUN, sequential write
	BackupLUNs         int
	DataLUNReadMBps    float64 // database data LUN, sequential read (source and verification instance)
	DataLUNWriteMBps   float64 // database data LUN, sequential write (the restore)
	DataLUNs           int
	CopyMBps           float64 // primary -> remote backup server copy
	// CompressionFactor = uncompressed / compressed size; 0 means 4 with
	// compression: true (seed 000: "between 1:4 and 1:6"), else 1.
	CompressionFactor float64
	InstantFileInit   bool // restore skips zeroing data files
	Cores             int  // SQL host cores for stripes: auto; 0 = unknown
}

// DefaultAssumptions is a modest site: 1 GbE NICs (~110 MB/s each), one
// backup LUN and one data LUN of 200 MB/s, the copy at one NIC's speed.
func DefaultAssumptions() Assumptions {
	return Assumptions{NICMBps: 110, BackupLUNReadMBps: 200, BackupLUNWriteMBps: 200, BackupLUNs: 1,
		DataLUNReadMBps: 200, DataLUNWriteMBps: 200, DataLUNs: 1, CopyMBps: 110}
}

// DefaultCompressionFactor is assumed for compression: true.
const DefaultCompressionFactor = 4

// PlanRequest names the database and what the plan may assume.
type PlanRequest struct {
	Instance, Database string
	// SizeBytes is data + log (the uncompressed backup size); 0 skips the
	// time estimates.
	SizeBytes int64
	// LastServer is the previous cycle's primary ("" = none: the rotation
	// starts at its first server). The real cycle reads it from the manifests.
	LastServer string
	// Sequence numbers the example file names (0: 1).
	Sequence    int64
	Assumptions Assumptions
	// Measured are the rates measured for the database (MeasuredThroughput
	// reads them from its manifests): where one fits, it replaces the
	// assumptions for its step (plan.Estimate). Zero: none.
	Measured plan.Throughput
}

// CyclePlan is what a cycle of the database would do, computed from the
// configuration alone (nothing is contacted).
type CyclePlan struct {
	Database       string // instance/name
	Address        string // source SQL instance
	Rotation       []string
	LastServer     string
	Primary        string
	Remote         string // copy target of Primary
	VerifyInstance string
	// ProofSpace is what the database's copies take on VerifyInstance at
	// their peak, with its log proof (SizeBytes as data; zero bytes
	// without a size).
	ProofSpace  plan.ProofSpace
	NICPaths    []string // UNC paths of Primary
	Stripes     int
	StripesAuto bool
	// CycleStripes is what the cycle's plan step chooses for stripes: auto
	// today: it knows neither size nor cores (0 when not auto).
	CycleStripes int
	Layout       []tsql.Stripe
	Tuning       plan.Tuning
	Compression  bool
	MemoryBytes  int64 // BUFFERCOUNT x MAXTRANSFERSIZE as SQL Server will use them
	MemoryBudget int64 // 0 = none
	// MemoryErr is the memory guard's refusal ("" = within budget): the cycle
	// would fail with InsufficientMemory.
	MemoryErr   string
	Assumptions Assumptions // with CompressionFactor resolved
	Source      plan.Hardware
	RemoteHW    plan.Hardware
	Estimate    *plan.CycleEstimate // nil without SizeBytes
	// Rates are the rates Estimate used, each saying whether it was
	// measured (plan.SourceCycle, plan.SourceCalibration) or assumed (the
	// Assumptions); zero without SizeBytes.
	Rates plan.Throughput
	// DiffEvery is diff_backup.every (0: no differentials): `starter plan`
	// then compares the restores with and without one (CompareRecovery).
	DiffEvery time.Duration
	// RTO is the database's rto and LogEvery its log_backup.every (0:
	// none), for the recover after losing the site (`starter plan`).
	RTO, LogEvery time.Duration
	// Names are the names a cycle derives, each at its widest (sequence
	// tsql.MaxSequence, the widest stripe), with its limit; Over says
	// whether it exceeds it. PlanCycle fails when any does: the cycle
	// would fail after its BACKUP and copy.
	Names []DerivedName
}

// DerivedName is one name a cycle derives from the configuration.
type DerivedName struct {
	What  string
	Name  string
	Len   int
	Limit int
	Unit  string // "characters" (UTF-16, as Windows and SQL Server count) or "bytes"
	Over  bool
}

// MaxWorkflowIDBytes is Temporal's default limit on a workflow id: "the
// maximum length for identifiers (such as Workflow Id, Workflow Type, and
// Task Queue name) is 1000 characters", UTF-8, configurable with the
// limit.maxIDLength dynamic config
// (https://docs.temporal.io/self-hosted-guide/defaults).
const MaxWorkflowIDBytes = 1000

// ErrNameTooLong is wrapped by PlanCycle's error when a derived name is
// over its limit.
var ErrNameTooLong = tsql.ErrNameTooLong

// PlanCycle computes the plan of one cycle of a configured database, the
// same way the cycle's plan step does (round robin, stripe count and layout,
// tuning and memory guard), plus the seed's time estimates.
func PlanCycle(cfg *config.Config, req PlanRequest) (CyclePlan, error) {
	db, err := selection.Lookup(cfg, req.Instance, req.Database)
	if err != nil {
		return CyclePlan{}, err
	}
	p := CyclePlan{Database: db.ID(), Rotation: db.BackupServers, LastServer: req.LastServer, Compression: db.Compression,
		MemoryBudget: int64(db.MemoryBudget), Assumptions: req.Assumptions, DiffEvery: db.DiffBackup.Every,
		RTO: db.RTO, LogEvery: db.LogBackup.Every}
	// A database of an availability group backs up on one of its
	// replicas; the plan shows the first (they share the site).
	source := cfg.Sources(db.Instance)[0]
	if inst, ok := cfg.SQLInstance(source); ok {
		p.Address = inst.Address
	}
	if p.Primary, err = plan.NextServer(db.BackupServers, req.LastServer, nil); err != nil {
		return p, fmt.Errorf("database %s: %w", db.ID(), err)
	}
	srv, ok := cfg.BackupServer(p.Primary)
	if !ok {
		return p, fmt.Errorf("database %s: backup server %q is not configured under backup_servers", db.ID(), p.Primary)
	}
	p.NICPaths = srv.PathsFor(source) // the source's paths to the server
	p.Remote = db.CopyTarget(p.Primary)
	remote, ok := cfg.BackupServer(p.Remote)
	if !ok || p.Remote == p.Primary {
		return p, fmt.Errorf("database %s: no remote copy target for backups on %s: set copy_to, or list a second backup server", db.ID(), p.Primary)
	}
	p.VerifyInstance = remote.VerifyInstance
	p.ProofSpace = plan.ProofSpaceOf(db.ProofMode(), db.KeepVerifyDB, max(req.SizeBytes, 0), 0)

	a := &p.Assumptions
	p.Stripes, p.StripesAuto = int(db.Stripes), db.Stripes == config.StripesAuto
	if p.StripesAuto {
		p.Stripes, err = plan.AutoStripes(req.SizeBytes, len(p.NICPaths), a.Cores)
		if err == nil {
			p.CycleStripes, err = plan.AutoStripes(0, len(p.NICPaths), 0)
		}
	} else {
		err = plan.CheckBalance(p.Stripes, len(p.NICPaths))
	}
	if err != nil {
		return p, fmt.Errorf("database %s: %w", db.ID(), err)
	}
	seq := req.Sequence
	if seq == 0 {
		seq = 1
	}
	if p.Layout, err = tsql.Layout(p.NICPaths, tsql.NamesOf(db.Instance, db.Name), seq, p.Stripes); err != nil {
		return p, err
	}
	p.Tuning = plan.Tuning{Stripes: p.Stripes, BufferCount: db.BufferCount, MaxTransferSize: int(db.MaxTransferSize), BlockSize: int(db.BlockSize)}
	p.MemoryBytes = plan.BackupMemory(p.Tuning, a.DataLUNs)
	if err := plan.CheckTuning(p.Tuning, a.DataLUNs, p.MemoryBudget); err != nil {
		p.MemoryErr = err.Error()
	}

	if a.CompressionFactor == 0 {
		a.CompressionFactor = 1
		if db.Compression {
			a.CompressionFactor = DefaultCompressionFactor
		}
	}
	p.Source = plan.Hardware{NICMBps: a.NICMBps, NICs: len(p.NICPaths),
		BackupLUNReadMBps: a.BackupLUNReadMBps, BackupLUNWriteMBps: a.BackupLUNWriteMBps, BackupLUNs: a.BackupLUNs,
		DataLUNReadMBps: a.DataLUNReadMBps, DataLUNWriteMBps: a.DataLUNWriteMBps, DataLUNs: a.DataLUNs}
	p.RemoteHW = p.Source
	p.RemoteHW.NICs = max(len(remote.UNCPaths), 1)
	if err := p.checkNames(db, srv, remote); err != nil {
		return p, err
	}
	if req.SizeBytes < 0 {
		return p, errors.New("plan: database size is negative; give data + log size in bytes, e.g. 2TiB")
	}
	if req.SizeBytes > 0 {
		est, rates, err := plan.Estimate(plan.Cycle{Source: p.Source, Remote: p.RemoteHW, CopyMBps: a.CopyMBps,
			Workload: plan.Workload{DataBytes: req.SizeBytes, CompressionFactor: a.CompressionFactor, InstantFileInit: a.InstantFileInit}},
			db.Compression, req.Measured)
		if err != nil {
			return p, err
		}
		p.Estimate, p.Rates = &est, rates
	}
	return p, nil
}

// checkNames fills p.Names with every name a cycle of db derives, at its
// widest, as the configuration check does (config.Parse), and fails naming
// each one over its limit and its fix. The workflow id is checked here only
// (package config cannot build it).
func (p *CyclePlan) checkNames(db *config.Database, primary, remote *config.BackupServer) error {
	add := func(what, name string, n, limit int, unit string) {
		p.Names = append(p.Names, DerivedName{What: what, Name: name, Len: n, Limit: limit, Unit: unit, Over: n > limit})
	}
	fromLimit := func(what, name string, e *tsql.LimitError, limit int, unit string, n int) {
		if e != nil {
			add(what, e.Name, e.Len, e.Limit, e.Unit)
			return
		}
		add(what, name, n, limit, unit)
	}
	id := workflows.CycleWorkflowID(db.Instance, db.Name)
	add("workflow id", id, len(id), MaxWorkflowIDBytes, "bytes")
	vn := db.VerifyDatabaseName(tsql.MaxSequence)
	fromLimit("verification database name", vn, tsql.CheckIdentLen("", vn), tsql.MaxIdentLen, "characters", utf16Len(vn))
	widest := p.Stripes
	if p.StripesAuto {
		widest = tsql.MaxStripes // the cycle's own choice may differ from this plan's
	}
	stripe := tsql.StripeFileName(db.Instance, db.Name, tsql.MaxSequence, widest, widest)
	for _, f := range []struct{ what, name string }{
		{"stripe file name", stripe},
		{"manifest file name", tsql.ManifestFileName(db.Instance, db.Name, tsql.MaxSequence)},
		{"sequence file name", tsql.SequenceFileName(db.Instance, db.Name)},
	} {
		fromLimit(f.what, f.name, tsql.CheckFileName("", f.name), tsql.MaxFileNameLen, "bytes", len(f.name))
	}
	// The source writes to the primary by its paths, the verification
	// instance reads the copy by its own.
	for _, u := range []struct {
		s    *config.BackupServer
		inst string
	}{{primary, db.Instance}, {remote, remote.VerifyInstance}} {
		for _, dir := range u.s.PathsFor(u.inst) {
			path := tsql.JoinPath(dir, stripe)
			fromLimit("stripe path on "+u.s.Name, path, tsql.CheckPath("", path), tsql.MaxPath, "characters", utf16Len(path))
		}
	}
	for _, dir := range []string{remote.RestoreDataDir, remote.RestoreLogDir} {
		if dir == "" {
			continue
		}
		prefix := tsql.JoinPath(dir, "")
		fromLimit("restore directory on "+remote.Name, prefix, tsql.CheckRestoreDir("", dir), tsql.MaxPhysicalPath-tsql.MinMoveRoom,
			"characters", utf16Len(prefix))
	}
	var over []string
	for _, n := range p.Names {
		if n.Over {
			over = append(over, fmt.Sprintf("%s %q is %d %s, the limit is %d (%s)", n.What, n.Name, n.Len, n.Unit, n.Limit, nameFix(n.What)))
		}
	}
	if len(over) > 0 {
		return fmt.Errorf("database %s: %w: %s", db.ID(), ErrNameTooLong, strings.Join(over, "; "))
	}
	return nil
}

// nameFix says how to bring a derived name within its limit.
func nameFix(what string) string {
	switch {
	case what == "workflow id":
		return "use a shorter instance name, or raise limit.maxIDLength on the Temporal server"
	case what == "verification database name":
		return "set verify_name to a shorter pattern"
	case strings.HasPrefix(what, "stripe path"):
		return "use a shorter unc_paths (or sql_paths) entry"
	case strings.HasPrefix(what, "restore directory"):
		return "use a shorter restore_data_dir/restore_log_dir"
	}
	return "use a shorter instance name"
}

// utf16Len counts as SQL Server and Windows count.
func utf16Len(s string) int { return len(utf16.Encode([]rune(s))) }

// Measured is what the manifests of a database say about its throughput.
type Measured struct {
	// Throughput combines the rates of the verified sets
	// (plan.FromManifests); zero when none measured a step.
	Throughput plan.Throughput
	// Read are the backup servers whose manifests were read; Unread says
	// why each other server of the database was not: its sets are missing.
	Read   []string
	Unread map[string]string
}

// MeasuredThroughput reads the manifests of a configured database on its
// backup servers and their copy targets (open nil means status.Open) and
// combines the rates of its verified sets, of the manifests its manifest
// keys authenticate (those it cannot are an error, as the workers would
// make them). It only reads. A server that cannot be read is reported in
// Unread, not as an error: the others still answer.
func MeasuredThroughput(ctx context.Context, cfg *config.Config, instance, database string, open status.OpenFunc) (Measured, error) {
	db, err := selection.Lookup(cfg, instance, database)
	if err != nil {
		return Measured{}, err
	}
	keys, err := cfg.ManifestKeyRing()
	if err != nil {
		return Measured{}, fmt.Errorf("%w: the measured rates come from the manifests, which the workers' manifest keys authenticate: give this command the same key_env or key_file", err)
	}
	if open == nil {
		open = status.Open
	}
	servers := db.ServersAndTargets()
	var out Measured
	var all []*catalog.Manifest
	var calibrations []plan.Throughput
	for _, name := range servers {
		srv, ok := cfg.BackupServer(name)
		if !ok {
			continue // the configuration check names it
		}
		l, cal, err := readManifests(ctx, srv, db, open, keys)
		if err != nil {
			if out.Unread == nil {
				out.Unread = map[string]string{}
			}
			out.Unread[name] = err.Error()
			continue
		}
		out.Read = append(out.Read, name)
		all = append(all, l...)
		if cal.Any() {
			calibrations = append(calibrations, cal)
		}
	}
	out.Throughput = plan.FromManifests(catalog.Of(db.Instance, db.Name), all, calibrations...)
	return out, nil
}

// readManifests reads a server's manifests of db, and the backup rate of
// its calibration report when there is one (`starter calibrate`).
func readManifests(ctx context.Context, srv *config.BackupServer, db *config.Database, open status.OpenFunc,
	keys *catalog.Keys) ([]*catalog.Manifest, plan.Throughput, error) {
	st, err := open(ctx, srv)
	if err != nil {
		return nil, plan.Throughput{}, fmt.Errorf("open backup server %s (%s): %w: check that it is reachable and its location and credentials in the config",
			srv.Name, srv.Loc.String(), err)
	}
	defer st.Close()
	sets := catalog.Of(db.Instance, db.Name)
	l, err := catalog.List(ctx, status.ReadOnlyFS(st), keys, &sets)
	if err != nil {
		return nil, plan.Throughput{}, fmt.Errorf("list manifests of %s on backup server %s: %w", db.ID(), srv.Name, err)
	}
	r, ok, err := activities.LoadCalibration(ctx, st, db.Instance, db.Name)
	if err != nil {
		return nil, plan.Throughput{}, fmt.Errorf("calibration report of %s on backup server %s: %w", db.ID(), srv.Name, err)
	}
	if !ok {
		return l.Manifests, plan.Throughput{}, nil
	}
	return l.Manifests, r.Throughput(), nil
}
