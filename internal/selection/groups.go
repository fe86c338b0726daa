package selection

import (
	"fmt"
	"slices"
	"strings"

	"github.com/backupcycle/backupcycle/internal/config"
)

// Databases of availability groups. A database a replica of a configured
// group hosts as an availability database (sys.databases.replica_id set)
// is the group's: its key is the group's name, whichever replica resolved
// it, and its settings come from the one databases: entry that names it on
// the group or on any of its replicas. A database of the replica outside
// any group is the instance's, as without groups.

// GroupOf is the configured availability group database d of instance
// belongs to: instance is one of its replicas and d an availability
// database there whose group is the configured one (or whose group the
// login may not see: the configuration says the instance is a replica of
// that group). A database in another availability group of the instance
// is not the group's.
func GroupOf(cfg *config.Config, instance string, d Database) (*config.AvailabilityGroup, bool) {
	if !d.InAvailabilityGroup {
		return nil, false
	}
	g, ok := cfg.GroupOf(instance)
	if !ok || d.AvailabilityGroup != "" && !strings.EqualFold(d.AvailabilityGroup, g.SQLName()) {
		return nil, false
	}
	return g, true
}

// inGroup reports whether a databases: entry of entryInstance may name a
// database of group g: an entry on the group or on one of its replicas.
func inGroup(g *config.AvailabilityGroup, entryInstance string) bool {
	return entryInstance == g.Name || slices.Contains(g.Replicas, entryInstance)
}

// groupEntryFor is the databases: entry (on the group or one of its
// replicas) that names database id on the replica n was read from; nil
// for none. Two entries naming it are refused.
func (n Names) groupEntryFor(cfg *config.Config, g *config.AvailabilityGroup, id int64) (*config.Database, error) {
	var found []*config.Database
	for i := range cfg.Databases {
		c := &cfg.Databases[i]
		if got, ok := n.IDs[c.Name]; ok && got == id && inGroup(g, c.Instance) {
			found = append(found, c)
		}
	}
	return theOne(found, func() error {
		return fmt.Errorf("the databases: entries %s/%s and %s/%s name one database of availability group %s: keep one, with instance: %s, in %s",
			found[0].Instance, found[0].Name, found[1].Instance, found[1].Name, g.Name, g.Name, cfg.File)
	})
}

// theOne is the only entry of found: nil for none, ambiguous's error for
// several.
func theOne(found []*config.Database, ambiguous func() error) (*config.Database, error) {
	switch len(found) {
	case 0:
		return nil, nil
	case 1:
		return found[0], nil
	}
	return nil, ambiguous()
}

// groupDatabaseFor is DatabaseFor for a database of group g: the entry
// spelled entry (name when "") on the group or on one of its replicas,
// keyed by the group; without one, defaults: with the group's rotation
// (availability_groups[].backup_servers, else its replicas', else the
// rotation its entries share). fromEntry says which.
func groupDatabaseFor(cfg *config.Config, g *config.AvailabilityGroup, name, entry string) (db config.Database, fromEntry bool, err error) {
	if entry == "" {
		entry = name
	}
	var peers []*config.Database
	for i := range cfg.Databases {
		c := &cfg.Databases[i]
		if !inGroup(g, c.Instance) {
			continue
		}
		if c.Name == entry {
			db := *c
			db.Instance, db.Aliases = g.Name, g.Former()
			if db.Name != name {
				db.Name, db.Entry = name, entry
			}
			return db, true, nil
		}
		peers = append(peers, c)
	}
	if entry != name {
		return config.Database{}, false, fmt.Errorf("database %q of availability group %s: no databases: entry %q on it or its replicas in %s", name, g.Name, entry, cfg.File)
	}
	db = config.Database{Name: name, Instance: g.Name, Policy: cfg.Defaults, Aliases: g.Former()}
	if len(g.BackupServers) > 0 {
		db.BackupServers, db.CopyTo = slices.Clone(g.BackupServers), g.CopyTo
		return db, false, nil
	}
	for _, r := range g.Replicas {
		if in, ok := cfg.SQLInstance(r); ok && len(in.BackupServers) > 0 {
			db.BackupServers, db.CopyTo = slices.Clone(in.BackupServers), in.CopyTo
			return db, false, nil
		}
	}
	for _, p := range peers {
		switch {
		case db.BackupServers == nil:
			db.BackupServers, db.CopyTo = slices.Clone(p.BackupServers), p.CopyTo
		case strings.Join(db.BackupServers, "\x00") != strings.Join(p.BackupServers, "\x00") || db.CopyTo != p.CopyTo:
			return config.Database{}, false, fmt.Errorf("database %q of availability group %s is selected by its replicas' databases: but the databases configured on the group use different backup_servers/copy_to, so its rotation is ambiguous: set availability_groups[].backup_servers on %s, or add a databases: entry for %q with instance: %s", name, g.Name, g.Name, name, g.Name)
		}
	}
	if len(db.BackupServers) == 0 {
		return config.Database{}, false, fmt.Errorf("database %q of availability group %s is selected by its replicas' databases: but there is no rotation to inherit: set availability_groups[].backup_servers on %s, or add a databases: entry (name, instance %s, backup_servers) for it", name, g.Name, g.Name, g.Name)
	}
	return db, false, nil
}

// configuredInGroup is the configuration of database name of group g: its
// entry, or, when a replica's selection picks it, the group's defaults;
// else the error of a database that is not configured.
func configuredInGroup(cfg *config.Config, g *config.AvailabilityGroup, name, entry string) (*config.Database, error) {
	db, fromEntry, err := groupDatabaseFor(cfg, g, name, entry)
	if err != nil {
		return nil, err
	}
	if !fromEntry && !Selects(cfg, g.Name, name) {
		return nil, fmt.Errorf("database %q is neither configured on availability group %s (or its replicas) nor selected by a replica's databases: in %s: add it under databases: with instance: %s", name, g.Name, cfg.File, g.Name)
	}
	return &db, nil
}

// foldedGroupEntry is the entry of group g (on the group or a replica)
// spelled name but for case; nil when there is none.
func foldedGroupEntry(cfg *config.Config, g *config.AvailabilityGroup, name string) *config.Database {
	for i := range cfg.Databases {
		c := &cfg.Databases[i]
		if inGroup(g, c.Instance) && strings.EqualFold(c.Name, name) {
			db := *c
			db.Instance, db.Aliases = g.Name, g.Former()
			return &db
		}
	}
	return nil
}
