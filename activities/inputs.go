package activities

import (
	"fmt"
	"slices"
	"strings"

	"github.com/backupcycle/backupcycle/internal/catalog"
	"github.com/backupcycle/backupcycle/internal/config"
	"github.com/backupcycle/backupcycle/internal/plan"
	"github.com/backupcycle/backupcycle/internal/tsql"
)

// An activity's input is not the configuration. Anyone with access to the
// Temporal namespace can start a workflow with any input from the Web UI,
// and anyone who can poll the task queue can schedule activities with any
// input. So every activity re-derives from the configuration in force what
// its input may name (servers, stripes, the BACKUP's mode) and accepts only
// what that allows, or less: an input may make a step narrower (COPY_ONLY
// forced on, fewer stripes), never wider. What it refuses is InvalidConfig,
// naming the input and what the configuration allows.

// rotationOf names the database's rotation for messages.
func rotationOf(db *config.Database) string {
	return "[" + strings.Join(db.BackupServers, ", ") + "]"
}

// copyTargets are the servers that receive the remote copies of the
// database's sets: each rotation server's copy target, once each.
func copyTargets(db *config.Database) []string {
	var out []string
	for _, s := range db.BackupServers {
		if t := db.CopyTarget(s); t != "" && !slices.Contains(out, t) {
			out = append(out, t)
		}
	}
	return out
}

// databaseServers are every server the database's sets may be on: its
// rotation, then its copy targets.
func databaseServers(db *config.Database) []string {
	out := slices.Clone(db.BackupServers)
	for _, t := range copyTargets(db) {
		if !slices.Contains(out, t) {
			out = append(out, t)
		}
	}
	return out
}

// notOfDatabase is the InvalidConfig of an input that names a backup server
// the database does not use as what.
func (d *CycleDeps) notOfDatabase(db *config.Database, input, server, what string, allowed []string) error {
	return nonRetryable(ErrInvalidConfig, d.notConfigured(fmt.Errorf(
		"%s %q is not %s of %s (%s; backup_servers %s, copy_to %q in %s): a step only ever uses the database's own servers, "+
			"as the configuration names them; the next cycle plans again", input, server, what, db.ID(),
		strings.Join(allowed, ", "), rotationOf(db), db.CopyTo, d.config().File)))
}

// rotationServer is the backup server name of the database's rotation: the
// only servers a BACKUP writes to (and a copy is made from).
func (d *CycleDeps) rotationServer(db *config.Database, input, name string) (*config.BackupServer, error) {
	if !slices.Contains(db.BackupServers, name) {
		return nil, d.notOfDatabase(db, input, name, "in the backup server rotation", db.BackupServers)
	}
	return d.server(name)
}

// verifyServer is the backup server name when it is one of the database's
// copy targets: the only servers whose verification instance restores and
// checks its sets.
func (d *CycleDeps) verifyServer(db *config.Database, input, name string) (*config.BackupServer, error) {
	targets := copyTargets(db)
	if !slices.Contains(targets, name) {
		return nil, d.notOfDatabase(db, input, name, "a copy target", targets)
	}
	return d.server(name)
}

// databaseServerList checks that every name is a server the database's sets
// may be on (databaseServers), each once.
func (d *CycleDeps) databaseServerList(db *config.Database, input string, names []string) error {
	all := databaseServers(db)
	for i, n := range names {
		if !slices.Contains(all, n) {
			return d.notOfDatabase(db, input, n, "a backup server", all)
		}
		if slices.Contains(names[:i], n) {
			return nonRetryable(ErrInvalidConfig, fmt.Errorf("%s names backup server %q twice", input, n))
		}
	}
	return nil
}

// remoteHolder checks that the set m (read from srv) was copied to srv: a
// restore, CHECKDB or sanity check of the set runs on its remote copy,
// never on the files of its primary nor on a set that was never copied.
func remoteHolder(m *catalog.Manifest, db *config.Database, seq int64, srv string) error {
	if m.State.Rank() >= catalog.StateCopied.Rank() && srv != m.PrimaryServer && slices.Contains(m.Servers, srv) {
		return nil
	}
	return nonRetryable(ErrInvalidConfig, fmt.Errorf(
		"set %d of %s on %s is %s with primary %s and holders %v: only a set copied to %s is restored and checked there",
		seq, db.ID(), srv, m.State, m.PrimaryServer, m.Servers, srv))
}

// runMode is the BACKUP mode a Backup input asks for, held to the
// configuration: COPY_ONLY may be forced on (a read-only source, a
// secondary replica), never off when copy_only is configured;
// COMPRESSION may be turned off (an edition without it), never on when
// compression is off; a MAXTRANSFERSIZE other than the configured one is
// taken only where the plan sends one (none configured: a TDE database on
// SQL Server 2016 or 2017, plan.TDEMaxTransferSize). nil is the
// configuration's mode.
func runMode(db *config.Database, m *BackupMode) (BackupMode, error) {
	want := configuredMode(db)
	if m == nil {
		return want, nil
	}
	got := want
	got.CopyOnly = db.CopyOnly || m.CopyOnly
	got.Compression = db.Compression && m.Compression
	if b := m.Differential; b != nil {
		// Only where diff_backup is configured, never COPY_ONLY (which
		// owns_backup_chain rules out), on an earlier set.
		switch {
		case !db.DiffBackups() || db.CopyOnly:
			return got, nonRetryable(ErrInvalidConfig, fmt.Errorf(
				"BACKUP of %s asked for a differential; the configuration takes none of it (diff_backup with owns_backup_chain: true)", db.ID()))
		case b.Sequence <= 0 || b.BackupSetGUID == "" || b.LSN != "":
			return got, nonRetryable(ErrInvalidConfig, fmt.Errorf(
				"BACKUP of %s asked for a differential on base %+v: a base is a set number and its backup set GUID", db.ID(), *b))
		}
		got.CopyOnly = false
		base := *b
		got.Differential = &base
	}
	if m.MaxTransferSize != 0 && m.MaxTransferSize != int(db.MaxTransferSize) {
		if db.MaxTransferSize != 0 || m.MaxTransferSize != plan.DefaultMaxTransferSize {
			return got, nonRetryable(ErrInvalidConfig, fmt.Errorf(
				"BACKUP of %s asked for MAXTRANSFERSIZE = %d; the configuration's max_transfer_size is %d and only a TDE database without one is sent %d",
				db.ID(), m.MaxTransferSize, int(db.MaxTransferSize), plan.DefaultMaxTransferSize))
		}
		got.MaxTransferSize = m.MaxTransferSize
	}
	return got, nil
}

// maxStripes is the most stripes a BACKUP of the database may write: the
// configured count, or with `stripes: auto` the most whose buffers fit the
// memory budget (the plan's automatic count never goes beyond).
func maxStripes(db *config.Database) int {
	if db.Stripes != config.StripesAuto {
		return int(db.Stripes)
	}
	if db.MemoryBudget <= 0 {
		return tsql.MaxStripes
	}
	return min(db.MaxStripesInBudget(), tsql.MaxStripes)
}

// checkStripes holds a Backup input's stripe count to the configuration:
// from 1 to maxStripes, within the memory budget with the MAXTRANSFERSIZE
// the BACKUP sends (mts). Fewer than configured is narrower and taken.
func checkStripes(db *config.Database, n, mts int) error {
	top := maxStripes(db)
	if n < 1 || n > top {
		return nonRetryable(ErrInvalidConfig, fmt.Errorf(
			"BACKUP of %s asked for %d stripes; the configuration allows 1 to %d (stripes %s, memory_budget %s)",
			db.ID(), n, top, stripesText(db.Stripes), db.MemoryBudget))
	}
	t := plan.Tuning{Stripes: n, BufferCount: db.BufferCount, MaxTransferSize: mts, BlockSize: int(db.BlockSize)}
	if err := plan.CheckTuning(t, 1, int64(db.MemoryBudget)); err != nil {
		return nonRetryable(ErrInsufficientMemory, fmt.Errorf("BACKUP of %s with %d stripes: %w", db.ID(), n, err))
	}
	return nil
}

func stripesText(s config.Stripes) string {
	if s == config.StripesAuto {
		return "auto"
	}
	return fmt.Sprint(int(s))
}

// runSequenceMethod is the sequence method a SequenceInput asks for, held
// to the configuration: the configured one, or catalog (which writes
// nothing to the source: the plan's choice for a read-only source or a
// secondary replica). "" is the configured one.
func runSequenceMethod(db *config.Database, method string) (string, error) {
	switch method {
	case "":
		return db.Sequence, nil
	case db.Sequence, config.SequenceCatalog:
		return method, nil
	}
	return "", nonRetryable(ErrInvalidConfig, fmt.Errorf(
		"sequence method %q asked for %s; the configuration's is %q, and a run may only fall back to %q", method, db.ID(), db.Sequence,
		config.SequenceCatalog))
}

// slotsOf are the slots a cycle of a database of instance (an SQL instance
// or an availability group) with primary and remote occupies: its
// instance's and each server's max_concurrent (the fleet's limits,
// fleetLimits), in SlotOrder.
func slotsOf(cfg *config.Config, instance string, servers ...string) []Slot {
	limits := fleetLimits(cfg)
	out := []Slot{{Kind: SlotInstance, Name: instance, Limit: max(limits.Instances[instance], 1)}}
	for _, s := range servers {
		if s != "" && !slices.ContainsFunc(out, func(o Slot) bool { return o.Kind == SlotServer && o.Name == s }) {
			out = append(out, Slot{Kind: SlotServer, Name: s, Limit: max(limits.Servers[s], 1)})
		}
	}
	SlotOrder(out)
	return out
}

// SlotOrder sorts slots into the one order every cycle takes them in
// (kind, then name): a cycle waits for a slot only while it holds slots
// that come before it, so no two cycles can wait for each other.
func SlotOrder(slots []Slot) {
	slices.SortFunc(slots, func(a, b Slot) int {
		if c := strings.Compare(a.Kind, b.Kind); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
}
