package activities

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"

	"go.temporal.io/sdk/temporal"

	"github.com/backupcycle/backupcycle/internal/catalog"
	"github.com/backupcycle/backupcycle/internal/config"
	"github.com/backupcycle/backupcycle/internal/selection"
	"github.com/backupcycle/backupcycle/internal/tsql"
)

// checkNames checks every name a cycle of db derives (verification
// database, file names and paths of its sets, restored files) before any
// SQL runs. Loading the configuration checks its databases: entries; a
// database a selection picks (USER_DATABASES, a pattern) is named only by
// sys.databases, so its names are first seen here. A name over its limit
// would fail the cycle after its BACKUP and copy, leaving a failed set and
// a used sequence number every night: not retryable, InvalidConfig.
func (d *CycleDeps) checkNames(db *config.Database) error {
	cfg := d.config()
	if cfg == nil {
		return errNotWired
	}
	if err := cfg.CheckNames(db); err != nil {
		return nonRetryable(ErrInvalidConfig, err)
	}
	return nil
}

// resolveDatabase is the database a start of name (on instance, or on the
// instance the configuration gives) names, as that instance resolves the
// name: by its collation, against sys.databases (selection.Names.Resolve).
// Every start (starter run, the Web UI, a schedule, the fleet) goes through
// it, so one database has one spelling for its workflow id, its file names
// and its manifests, and its databases: entry applies whatever the case it
// was written in on a case-insensitive instance. A name with a leading or
// trailing blank is refused, and so is a name the instance has no database
// of (DatabaseNotFound; on a case-sensitive instance the message names the
// databases spelled the same but for case).
//
// unresolved is set, with the configuration as written, when the instance
// cannot be reached: the workflow waits for it as for a lost SQL host and
// plans again, rather than run under a spelling the instance has not
// confirmed.
//
// An availability group is asked through its replicas, in order, the
// first that has the database as an availability database deciding; a
// start through a replica asks that replica first, then the others while
// it cannot be reached: a database a replica hosts in the configured group
// is the group's (selection.GroupOf), keyed by the group whichever replica
// resolved it.
//
// note is a warning for the plan: the database is an availability database
// of an instance configured as no group's replica, so each replica
// configured as an instance backs it up on its own.
func (a *Activities) resolveDatabase(ctx context.Context, instance, name string) (db *config.Database, unresolved, note string, err error) {
	d := &a.Cycle
	cfg := d.config()
	if cfg == nil {
		return nil, "", "", errNotWired
	}
	if err := config.CheckDatabaseName(name); err != nil {
		return nil, "", "", nonRetryable(ErrInvalidConfig, err)
	}
	// The configuration as written must know the database (its entry in
	// any case, or the selection): it names the instance to ask, and a
	// name it does not know is refused before any SQL runs.
	written, err := lookup(d, func(c *config.Config) (*config.Database, error) { return selection.Lookup(c, instance, name) })
	if err != nil {
		return nil, "", "", nonRetryable(ErrInvalidConfig, d.notConfigured(err))
	}
	if instance == "" {
		instance = written.Instance
	}
	cfg = d.config()
	// Where to ask: the instance; for an availability group its replicas
	// in order; for a replica, itself first, then the other replicas (its
	// availability databases are the group's, which another replica can
	// resolve while it is down).
	asked := []string{instance}
	g, isGroup := cfg.AvailabilityGroup(instance)
	if isGroup {
		asked = g.Replicas
	} else if rg, ok := cfg.GroupOf(instance); ok {
		for _, r := range rg.Replicas {
			if r != instance {
				asked = append(asked, r)
			}
		}
	}
	var why []string
	unread := 0
	var broken error // a replica whose login or settings are wrong
	for i, at := range asked {
		inst, ierr := d.instance(at)
		if ierr != nil {
			return nil, "", "", ierr
		}
		names, rerr := a.readNames(ctx, inst, cfg, name)
		if rerr != nil {
			var appErr *temporal.ApplicationError
			if errors.As(rerr, &appErr) && appErr.NonRetryable() {
				if !isGroup && i == 0 {
					return nil, "", "", rerr
				}
				broken = cmp.Or(broken, rerr)
			}
			unread++
			why = append(why, fmt.Sprintf("%s: %v", at, rerr))
			continue
		}
		res, err := lookup(d, func(c *config.Config) (*config.Database, error) {
			db, err := names.Resolve(c, at, name)
			return &db, err
		})
		var missing *selection.NoSuchDatabaseError
		switch {
		case (isGroup || i > 0) && errors.As(err, &missing):
			why = append(why, fmt.Sprintf("%s: %v", at, err))
			continue
		case errors.As(err, &missing):
			return nil, "", "", nonRetryable(ErrDatabaseNotFound, err)
		case err != nil:
			return nil, "", "", nonRetryable(ErrInvalidConfig, d.notConfigured(err))
		}
		if (isGroup || i > 0) && !isGroupOf(cfg, res.Instance, at) {
			// Not an availability database of the group on this replica
			// (a database of its own, or not yet joined).
			why = append(why, fmt.Sprintf("%s: '%s' is not an availability database of %s there", at, tsql.Printable(res.Name), groupName(cfg, at)))
			continue
		}
		return res, "", unconfiguredGroup(cfg, names, res, at), nil
	}
	switch {
	case isGroup && unread == 0:
		return nil, "", "", nonRetryable(ErrDatabaseNotFound, fmt.Errorf("database '%s' is not an availability database of %s on any of its replicas (%s): check the database name, or the group's replicas in the configuration",
			tsql.Printable(name), instance, strings.Join(why, "; ")))
	case isGroup && unread == len(asked) && broken != nil:
		return nil, "", "", broken
	}
	return written, fmt.Sprintf("the name %q could not be resolved on %s: %s", name, instance, strings.Join(why, "; ")), "", nil
}

// unconfiguredGroup is the plan's warning for db, resolved on instance at,
// when it is an availability database there but not of a configured group
// (two backups a night, two sequences).
func unconfiguredGroup(cfg *config.Config, names selection.Names, db *config.Database, at string) string {
	if db.Instance != at {
		return ""
	}
	for _, d := range names.Databases {
		if d.Name == db.Name && d.InAvailabilityGroup {
			group := "an availability group"
			if d.AvailabilityGroup != "" {
				group = "availability group " + d.AvailabilityGroup
			}
			return fmt.Sprintf("availability group: %s is in %s on %s, which is no configured group: each of its replicas configured as an instance backs it up on its own, into its own sequence; list them under availability_groups, so that it is backed up once, on the replica SQL Server prefers",
				db.ID(), group, at)
		}
	}
	return ""
}

// isGroupOf reports whether key is the availability group replica is a
// replica of.
func isGroupOf(cfg *config.Config, key, replica string) bool {
	g, ok := cfg.GroupOf(replica)
	return ok && g.Name == key
}

// groupName is the name of the availability group replica is a replica of.
func groupName(cfg *config.Config, replica string) string {
	if g, ok := cfg.GroupOf(replica); ok {
		return g.Name
	}
	return "its group"
}

// readNames asks inst what name and the names of its databases: entries
// name there (selection.ReadNames).
func (a *Activities) readNames(ctx context.Context, inst *config.SQLInstance, cfg *config.Config, name string) (selection.Names, error) {
	sqlDB, err := a.Cycle.openSQL(ctx, inst, "master")
	if err != nil {
		return selection.Names{}, err
	}
	defer sqlDB.Close()
	n, err := selection.ReadNames(ctx, sqlDB, selection.Asked(cfg, inst.Name, name))
	if err != nil {
		return selection.Names{}, sqlError(err)
	}
	return n, nil
}

// setsOf are db's sets on the backup servers: recorded under its name in
// either naming, and, when its databases: entry is spelled otherwise, the
// sets written under the entry's spelling before started names were
// resolved (catalog.DB).
//
// A database of an availability group counts the sets its replicas (and
// the group's aliases) wrote before the group was configured
// (config.Database.Aliases, catalog.DB.Instances).
func setsOf(db *config.Database) catalog.DB {
	d := catalog.Of(db.Instance, db.Name)
	if db.Entry != "" && db.Entry != db.Name {
		d.Also = []string{db.Entry}
	}
	d.Instances = db.Aliases
	return d
}
