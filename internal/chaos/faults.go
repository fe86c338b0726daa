package chaos

import (
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/backupcycle/backupcycle/activities"
)

// Fault is what goes wrong in a run (at most one per run).
type Fault string

const (
	FaultNone            Fault = "none"
	FaultWorkerKill      Fault = "worker-kill"         // SIGKILL of the worker running the step; a new one starts
	FaultWorkerFreeze    Fault = "worker-freeze"       // SIGSTOP; a new worker starts; the old one resumes later
	FaultTemporalRestart Fault = "temporal-restart"    // embedded server stopped and started on its SQLite file
	FaultSMBKill         Fault = "smbd-kill"           // a backup server's smbd killed, restarted later
	FaultSMBFreeze       Fault = "smbd-freeze"         // a backup server's smbd stopped (SIGSTOP), resumed later
	FaultSQLCrash        Fault = "sql-crash"           // the emulator crashes at a percent of BACKUP/RESTORE/CHECKDB
	FaultSQLLostConn     Fault = "sql-lost-connection" // the connection running BACKUP/RESTORE/CHECKDB dropped at a percent (all sessions at sequence)
	FaultRollback        Fault = "sequence-rollback"   // the source database restored from an older verified set first
	FaultSecondStart     Fault = "second-start"        // the same database started again from another entry point
	FaultCancel          Fault = "cancel"              // the cycle cancelled (Web UI / client)
	FaultFlipOld         Fault = "stripe-flip-old"     // a byte of a stripe of a non-verified set flipped on one server
	FaultFlipNew         Fault = "stripe-flip-new"     // a byte of the stripe being written flipped during BACKUP
	FaultShareFullSQL    Fault = "share-full-backup"   // the share SQL Server writes to has no room (emulator quota)
	FaultShareFullSMB    Fault = "share-full-copy"     // the share reports no free space over SMB (Samba max disk size)
	// Files a share writer plants on HostileServer at a moment of the run
	// (hostile.go); they stay there.
	FaultPlantLink    Fault = "plant-symlinks"        // stripe-named and .partial symlinks to a file outside the share
	FaultPlantHuge    Fault = "plant-huge-manifest"   // a 64 GiB sparse file named like a manifest
	FaultPlantForged  Fault = "plant-forged-manifest" // a real manifest altered to say verified, not signed by a worker
	FaultPlantWideSeq Fault = "plant-wide-sequence"   // an empty stripe numbered 999999999999999999
	// Faults of the log chain (logfaults.go), injected before the run's
	// cycle starts, while LogTarget's chain runs.
	FaultForeignLog   Fault = "foreign-log-backup"       // a DBA's BACKUP LOG of LogTarget to a share (Pick even) or a disk the worker does not reach
	FaultRecoveryFlip Fault = "recovery-simple"          // LogTarget switched to SIMPLE, back to FULL after Heal
	FaultRestoreLog   Fault = "verify-crash-restore-log" // verify01 crashes at a percent of the next RESTORE (the standby's RESTORE LOG)
	FaultLogDelete    Fault = "log-file-deleted"         // a log backup file of LogTarget deleted on Server
	// Faults of the object store vault01 (vault.go), aimed at a run of one
	// of ImmutableTargets.
	FaultVaultDown   Fault = "vault-down"          // versitygw killed, started again on its directory and port after Heal
	FaultVaultCut    Fault = "vault-upload-cut"    // versitygw killed at a percent of the immutable copy's upload, started again after Heal/4
	FaultVaultDelete Fault = "vault-worker-delete" // the worker's S3 credentials try to delete, overwrite, unlock a copied object
)

// faultWeights: how often each fault is drawn (out of their sum).
var faultWeights = []weighted[Fault]{
	{FaultNone, 4}, {FaultWorkerKill, 3}, {FaultWorkerFreeze, 2}, {FaultTemporalRestart, 2},
	{FaultSMBKill, 2}, {FaultSMBFreeze, 2}, {FaultSQLCrash, 3}, {FaultSQLLostConn, 2},
	{FaultRollback, 2}, {FaultSecondStart, 3}, {FaultCancel, 2}, {FaultFlipOld, 1},
	{FaultFlipNew, 1}, {FaultShareFullSQL, 1}, {FaultShareFullSMB, 1},
	{FaultPlantLink, 2}, {FaultPlantHuge, 2}, {FaultPlantForged, 2}, {FaultPlantWideSeq, 2},
	{FaultForeignLog, 2}, {FaultRecoveryFlip, 2}, {FaultRestoreLog, 2}, {FaultLogDelete, 2},
	{FaultVaultDown, 2}, {FaultVaultCut, 2}, {FaultVaultDelete, 2},
}

// isVault reports whether f is a fault of the object store.
func isVault(f Fault) bool {
	return f == FaultVaultDown || f == FaultVaultCut || f == FaultVaultDelete
}

// plantSteps: a file is planted at any moment of a cycle.
var plantSteps = []string{activities.StepPlan, activities.StepSequence, activities.StepBackup, activities.StepCatalog,
	activities.StepCopy, activities.StepRestore, activities.StepCheckDB, activities.StepSanity, activities.StepVerified,
	activities.StepRetention}

// isPlant reports whether f plants files on HostileServer.
func isPlant(f Fault) bool {
	return f == FaultPlantLink || f == FaultPlantHuge || f == FaultPlantForged || f == FaultPlantWideSeq
}

// weighted is a choice and how often it is drawn (out of the sum of its
// list's weights).
type weighted[T any] struct {
	v T
	w int
}

// pick draws one of ws by weight (one draw of r).
func pick[T any](r *rand.Rand, ws []weighted[T]) T {
	total := 0
	for _, x := range ws {
		total += x.w
	}
	n := r.IntN(total)
	for _, x := range ws {
		if n < x.w {
			return x.v
		}
		n -= x.w
	}
	return ws[len(ws)-1].v
}

// Entry points that start a cycle.
const (
	EntryStarter = "starter-run" // the canonical workflow id (starter run, other services)
	// EntryResume is `starter run --resume SEQ`: chosen instead of
	// EntryStarter for one run in three when the database has a set an
	// outage left unfinished.
	EntryResume   = "starter-run-resume"
	EntryWebUI    = "web-ui"   // any workflow id, as typed in the Web UI
	EntrySchedule = "schedule" // a trigger of the database's Temporal Schedule
)

var entries = []string{EntryStarter, EntryWebUI, EntrySchedule}

// stepOrder is the cycle's steps in order; a fault aimed at a step fires at
// the first step at or after it.
var stepOrder = []string{activities.StepPlan, activities.StepSequence, activities.StepBackup, activities.StepCatalog,
	activities.StepCopy, activities.StepRestore, activities.StepCheckDB, activities.StepSanity, activities.StepVerified,
	activities.StepDropVerifyDB, activities.StepImmutableCopy, activities.StepEvidence, activities.StepRetention, activities.StepDone}

func stepIndex(step string) int {
	for i, s := range stepOrder {
		if s == step {
			return i
		}
	}
	return -1
}

// Steps each fault can be aimed at.
var faultSteps = map[Fault][]string{
	FaultWorkerKill: {activities.StepPlan, activities.StepSequence, activities.StepBackup, activities.StepCatalog, activities.StepCopy,
		activities.StepRestore, activities.StepCheckDB, activities.StepSanity, activities.StepVerified, activities.StepRetention},
	FaultWorkerFreeze: {activities.StepBackup, activities.StepCopy, activities.StepRestore, activities.StepCheckDB,
		activities.StepSanity, activities.StepVerified},
	FaultTemporalRestart: {activities.StepPlan, activities.StepBackup, activities.StepCopy, activities.StepRestore,
		activities.StepCheckDB, activities.StepVerified, activities.StepRetention},
	FaultSMBKill: {activities.StepPlan, activities.StepBackup, activities.StepCatalog, activities.StepCopy, activities.StepRestore,
		activities.StepVerified, activities.StepRetention},
	FaultSMBFreeze: {activities.StepPlan, activities.StepCatalog, activities.StepCopy, activities.StepRestore, activities.StepVerified,
		activities.StepRetention},
	FaultSQLCrash:    {activities.StepBackup, activities.StepRestore, activities.StepCheckDB},
	FaultSQLLostConn: {activities.StepSequence, activities.StepBackup, activities.StepRestore, activities.StepCheckDB},
	FaultSecondStart: {activities.StepPlan, activities.StepBackup, activities.StepCopy, activities.StepRestore,
		activities.StepCheckDB, activities.StepSanity},
	FaultCancel: {activities.StepPlan, activities.StepBackup, activities.StepCatalog, activities.StepCopy, activities.StepRestore,
		activities.StepCheckDB, activities.StepSanity, activities.StepVerified, activities.StepRetention},
	FaultFlipNew:      {activities.StepBackup},
	FaultPlantLink:    plantSteps,
	FaultPlantHuge:    plantSteps,
	FaultPlantForged:  plantSteps,
	FaultPlantWideSeq: plantSteps,
	FaultVaultDown:    {activities.StepPlan, activities.StepBackup, activities.StepVerified, activities.StepImmutableCopy},
	FaultVaultCut:     {activities.StepImmutableCopy},
	FaultVaultDelete:  {activities.StepPlan, activities.StepBackup, activities.StepImmutableCopy},
}

// armed reports whether the plan's fault is armed in the emulator before
// the start (it fires at a percent of the statement itself).
func armed(p Plan) bool {
	return p.Fault == FaultSQLCrash || (p.Fault == FaultSQLLostConn && p.Step != activities.StepSequence)
}

// hasPercent: steps whose progress has a meaningful percent.
func hasPercent(step string) bool {
	switch step {
	case activities.StepBackup, activities.StepCopy, activities.StepRestore, activities.StepImmutableCopy:
		return true
	}
	return false
}

// Plan is every choice of one run, drawn up front from the run's own
// generator: the same seed and run number give the same plan whatever
// happened in earlier runs.
type Plan struct {
	Run     int
	Target  Target
	Entry   string
	WebID   string // workflow id for EntryWebUI
	NoInst  bool   // the Web UI start leaves out the instance (when the name is unique)
	Fault   Fault
	Step    string        // where the fault is aimed ("" = before the run)
	Percent float64       // ... at this percent of the step (when it has one)
	Dwell   time.Duration // ... after the step has run this long (steps without percent)
	Server  string        // backup server of smbd / share / stripe faults
	Heal    time.Duration // how long a killed/frozen component stays away
	Second  string        // entry point of the second start
	Pick    uint64        // chooses among candidates found at run time (set, worker, resume)
	Offset  uint64        // byte offset of a flip, modulo the file size
	// Estate is the SQL Server estate the run happens in (estate.go).
	Estate Estate
	// Twin: before a run of sales, a database named like the set the run
	// is about to make is created and verified (Sim.twin).
	Twin bool
	// Blank: a Web UI start types the name with a leading ("lead"),
	// trailing ("trail") or both blanks ("both"); "" types it as Spell says.
	Blank string
	// Recover, when its Entry is set, makes the run a recover or a drill
	// of LogTarget instead of a cycle (recoverentry.go); Entry and Fault
	// are then its.
	Recover RecoverPlan
}

// blanked is name as a start with blank types it.
func blanked(name, blank string) string {
	switch blank {
	case "lead":
		return " " + name
	case "trail":
		return name + " "
	case "both":
		return " " + name + " "
	}
	return name
}

// Draw makes run i's plan from seed. Every draw is made in the same order
// whatever the fault, so plans do not depend on each other. A non-empty
// force replaces the drawn fault (to exercise one fault kind; the other
// choices stay those of the seed).
func Draw(seed uint64, run int, force Fault) Plan {
	r := rand.New(rand.NewPCG(seed, uint64(run)*0x9E3779B97F4A7C15+1))
	p := Plan{Run: run}
	p.Target = Targets[r.IntN(len(Targets))]
	p.Entry = entries[r.IntN(len(entries))]
	p.WebID = fmt.Sprintf("%08x-%04x-4%03x-%04x-%012x", r.Uint32(), r.Uint32()&0xffff, r.Uint32()&0xfff,
		r.Uint32()&0x3fff|0x8000, r.Uint64()&0xffffffffffff)
	p.NoInst = r.IntN(2) == 0
	p.Fault = pick(r, faultWeights)
	if force != "" {
		p.Fault = force
	}
	stepDraw := r.Uint64()
	pctDraw := 5 + r.Float64()*90
	p.Dwell = time.Duration(r.IntN(1500)) * time.Millisecond
	p.Server = Servers[r.IntN(len(Servers))]
	p.Heal = time.Duration(500+r.IntN(7500)) * time.Millisecond
	if r.IntN(6) == 0 {
		// Now and then an outage outlasts the product's waits (host and
		// server waits give up after 15-20 s, the copy deadline is 30 s).
		p.Heal = time.Duration(25+r.IntN(20)) * time.Second
	}
	p.Pick = r.Uint64()
	p.Offset = r.Uint64()
	second := r.IntN(len(entries) - 1)
	if steps := faultSteps[p.Fault]; len(steps) > 0 {
		p.Step = steps[stepDraw%uint64(len(steps))]
		if hasPercent(p.Step) || armed(p) {
			p.Percent = pctDraw
		}
	}
	if p.Fault == FaultRestoreLog {
		p.Percent = pctDraw // of the standby's next RESTORE
	}
	// The second start comes through another entry point than the first.
	var others []string
	for _, e := range entries {
		if e != p.Entry {
			others = append(others, e)
		}
	}
	p.Second = others[second]
	// Drawn last, so that the draws above are those of builds before the
	// estate.
	p.Estate = drawEstate(r)
	p.Twin = r.IntN(2) == 0
	p.Blank = []string{"lead", "trail", "both", "", "", "", "", "", "", ""}[r.IntN(10)]
	if isVault(p.Fault) {
		if _, ok := immutableTarget(p.Target.Instance, p.Target.Database); !ok {
			// A fault of the object store hits a database copied there.
			p.Target = ImmutableTargets[p.Pick%uint64(len(ImmutableTargets))]
		}
		if p.Fault == FaultVaultCut {
			// The database whose stripes are multipart uploads.
			p.Target = CutTarget
		}
	}
	if p.Target.Database == SharedDB {
		p.NoInst = false // the name alone is ambiguous: the Web UI user names the instance
	}
	// Drawn after everything above, so that the cycles' draws are those of
	// builds before the recover entries.
	drawRecover(r, force, &p)
	return p
}

// ParseFault checks a fault name.
func ParseFault(s string) (Fault, error) {
	all := append(append([]weighted[Fault](nil), faultWeights...), recoverFaultWeights[1:]...)
	for _, fw := range all {
		if string(fw.v) == s {
			return fw.v, nil
		}
	}
	var names []string
	for _, fw := range all {
		names = append(names, string(fw.v))
	}
	return "", fmt.Errorf("unknown fault %q: use one of %v", s, names)
}

// Where says where the fault is aimed, for the report.
func (p Plan) Where() string {
	switch {
	case p.Fault == FaultNone:
		return "-"
	case p.Step == "":
		return "before-start"
	case p.Percent > 0:
		return fmt.Sprintf("%s@%.0f%%", p.Step, p.Percent)
	}
	return fmt.Sprintf("%s+%s", p.Step, p.Dwell)
}

func (p Plan) String() string {
	s := fmt.Sprintf("%s via %s", p.Target, p.Entry)
	if p.Recovers() {
		s += " " + p.Recover.String()
	}
	if p.Fault != FaultNone {
		s += fmt.Sprintf(", fault %s at %s", p.Fault, p.Where())
		switch p.Fault {
		case FaultSMBKill, FaultSMBFreeze, FaultShareFullSMB, FaultShareFullSQL, FaultFlipOld, FaultLogDelete, FaultServerGone, FaultRecoverLogFile:
			s += " on " + p.Server
		case FaultSecondStart:
			s += " via " + p.Second
		}
		if isPlant(p.Fault) {
			s += " on " + HostileServer
		}
		if isVault(p.Fault) {
			s += " on " + Vault01
		}
	}
	return s
}
