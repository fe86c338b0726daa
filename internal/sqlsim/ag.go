package sqlsim

import (
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/backupcycle/backupcycle/internal/sqlsim/tds"
)

// Always On availability groups, as far as a backup product sees them: a
// group spans emulator instances (its replicas), each with a role for the
// group's databases (primary, readable secondary, non-readable secondary),
// a backup priority and, per database, a synchronization state; the
// group's automated backup preference decides which replica
// sys.fn_hadr_backup_is_preferred_replica names. Real SQL Server keeps the
// group in the Windows Server Failover Cluster; here it is a Go value the
// test builds (NewAvailabilityGroup, AddReplica, AddDatabase) and turns
// (Failover, SetPreference, SetBackupPriority, SetSynchronizationState).
//
// Simplification: every replica keeps its own copy of a database's files,
// created by the test with the same name and contents (CreateDatabase on
// each); AddDatabase gives them one family GUID, so backups of either are
// backups of the same database. Writes are not replicated: a row written
// on the primary (a DBBackup.Sequence table) is not on the secondaries.
// The group is not kept in catalog.json: it lives as long as the Go value.

// Automated backup preferences (ALTER AVAILABILITY GROUP ... SET
// (AUTOMATED_BACKUP_PREFERENCE = ...),
// https://learn.microsoft.com/en-us/sql/t-sql/statements/alter-availability-group-transact-sql).
const (
	PreferPrimary       = "PRIMARY"        // backups always on the primary
	PreferSecondaryOnly = "SECONDARY_ONLY" // never on the primary; none when no secondary is online
	PreferSecondary     = "SECONDARY"      // on a secondary, the primary when it is the only replica online (the default)
	PreferNone          = "NONE"           // any replica, by backup priority alone
)

// preferenceCodes are sys.availability_groups.automated_backup_preference.
var preferenceCodes = map[string]int64{PreferPrimary: 0, PreferSecondaryOnly: 1, PreferSecondary: 2, PreferNone: 3}

// Synchronization states of a database replica
// (sys.dm_hadr_database_replica_states.synchronization_state_desc).
const (
	NotSynchronizing = "NOT SYNCHRONIZING"
	Synchronizing    = "SYNCHRONIZING"
	Synchronized     = "SYNCHRONIZED"
)

var syncCodes = map[string]int64{NotSynchronizing: 0, Synchronizing: 1, Synchronized: 2}

// ReplicaOptions place an instance in a group.
type ReplicaOptions struct {
	// Primary: this replica holds the primary role (exactly one does).
	Primary bool
	// Readable is SECONDARY_ROLE (ALLOW_CONNECTIONS = ALL); false is
	// ALLOW_CONNECTIONS = NO, the default: the secondary databases refuse
	// every query (976) but can still be backed up.
	Readable bool
	// BackupPriority is BACKUP_PRIORITY, 1 (lowest) to 100 (highest); 0
	// takes SQL Server's default, 50. ExcludeFromBackups is BACKUP_PRIORITY
	// = 0: never chosen for backups.
	BackupPriority     int
	ExcludeFromBackups bool
}

// AvailabilityGroup is one availability group over emulator instances.
type AvailabilityGroup struct {
	mu         sync.Mutex
	name       string
	id         guid
	preference string
	replicas   []*agReplica
	databases  []string
}

type agReplica struct {
	in       *Instance
	id       guid
	primary  bool
	readable bool
	priority int
	sync     map[string]string // lower-case database name -> state; "" = SYNCHRONIZED
}

// NewAvailabilityGroup is a group without replicas; preference is one of
// PreferPrimary, PreferSecondaryOnly, PreferSecondary, PreferNone ("" is
// SQL Server's default, SECONDARY).
func NewAvailabilityGroup(name, preference string) (*AvailabilityGroup, error) {
	g := &AvailabilityGroup{name: name, id: newGUID()}
	if err := g.SetPreference(preference); err != nil {
		return nil, err
	}
	return g, nil
}

// SetPreference is ALTER AVAILABILITY GROUP ... SET
// (AUTOMATED_BACKUP_PREFERENCE = p).
func (g *AvailabilityGroup) SetPreference(p string) error {
	p = strings.ToUpper(strings.TrimSpace(p))
	if p == "" {
		p = PreferSecondary
	}
	if _, ok := preferenceCodes[p]; !ok {
		return fmt.Errorf("sqlsim: automated backup preference %q: use PRIMARY, SECONDARY_ONLY, SECONDARY or NONE", p)
	}
	g.mu.Lock()
	g.preference = p
	g.mu.Unlock()
	return nil
}

// AddReplica makes in a replica of the group. An instance is a replica of
// one group at most (SQL Server allows more; the product's tests need one).
func (g *AvailabilityGroup) AddReplica(in *Instance, o ReplicaOptions) error {
	prio := o.BackupPriority
	switch {
	case o.ExcludeFromBackups:
		prio = 0
	case prio == 0:
		prio = 50 // CREATE AVAILABILITY GROUP's default BACKUP_PRIORITY
	case prio < 0 || prio > 100:
		return fmt.Errorf("sqlsim: backup priority %d: 0..100", prio)
	}
	in.mu.Lock()
	if in.ag != nil {
		in.mu.Unlock()
		return fmt.Errorf("sqlsim: instance %s is already a replica of availability group %s", in.cfg.Name, in.ag.name)
	}
	in.ag = g
	in.mu.Unlock()
	g.mu.Lock()
	defer g.mu.Unlock()
	if o.Primary {
		for _, r := range g.replicas {
			r.primary = false
		}
	}
	g.replicas = append(g.replicas, &agReplica{in: in, id: newGUID(), primary: o.Primary, readable: o.Readable, priority: prio, sync: map[string]string{}})
	return nil
}

// AddDatabase is ALTER AVAILABILITY GROUP ... ADD DATABASE and its join on
// every secondary: the database must exist on every replica (created by
// the test with the same name and contents); the secondaries' copies take
// the primary's family GUID, so that they are one database.
func (g *AvailabilityGroup) AddDatabase(name string) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	var family guid
	for _, r := range g.replicas {
		if r.primary {
			d := r.in.lookupDB(name)
			if d == nil {
				return fmt.Errorf("sqlsim: database %s does not exist on the primary replica %s", name, r.in.cfg.Name)
			}
			family = r.in.familyGUID(d)
		}
	}
	if family == (guid{}) {
		return fmt.Errorf("sqlsim: availability group %s has no primary replica", g.name)
	}
	for _, r := range g.replicas {
		in := r.in
		in.mu.Lock()
		d := in.lookupDBLocked(name)
		if d == nil {
			in.mu.Unlock()
			return fmt.Errorf("sqlsim: database %s does not exist on replica %s: create it there first (an availability group seeds its secondaries)", name, in.cfg.Name)
		}
		d.FamilyGUID = family
		err := in.saveCatalog()
		in.mu.Unlock()
		if err != nil {
			return err
		}
	}
	g.databases = append(g.databases, name)
	return nil
}

// Failover makes to the primary replica (ALTER AVAILABILITY GROUP ...
// FAILOVER on it); the former primary becomes a secondary, readable as its
// ReplicaOptions said.
func (g *AvailabilityGroup) Failover(to *Instance) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	found := false
	for _, r := range g.replicas {
		found = found || r.in == to
	}
	if !found {
		return fmt.Errorf("sqlsim: %s is not a replica of availability group %s", to.cfg.Name, g.name)
	}
	for _, r := range g.replicas {
		r.primary = r.in == to
	}
	return nil
}

// SetBackupPriority is ALTER AVAILABILITY GROUP ... MODIFY REPLICA ON ...
// WITH (BACKUP_PRIORITY = n), 0..100.
func (g *AvailabilityGroup) SetBackupPriority(in *Instance, n int) error {
	if n < 0 || n > 100 {
		return fmt.Errorf("sqlsim: backup priority %d: 0..100", n)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if r := g.replicaLocked(in); r != nil {
		r.priority = n
		return nil
	}
	return fmt.Errorf("sqlsim: %s is not a replica of availability group %s", in.cfg.Name, g.name)
}

// SetReadable is ALTER AVAILABILITY GROUP ... MODIFY REPLICA ON ... WITH
// (SECONDARY_ROLE (ALLOW_CONNECTIONS = ALL)) when readable, (ALLOW_CONNECTIONS
// = NO) otherwise ("ALTER AVAILABILITY GROUP (Transact-SQL)",
// https://learn.microsoft.com/en-us/sql/t-sql/statements/alter-availability-group-transact-sql):
// it applies while the replica holds the secondary role.
func (g *AvailabilityGroup) SetReadable(in *Instance, readable bool) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if r := g.replicaLocked(in); r != nil {
		r.readable = readable
		return nil
	}
	return fmt.Errorf("sqlsim: %s is not a replica of availability group %s", in.cfg.Name, g.name)
}

// SetSynchronizationState sets the state of database db on replica in:
// Synchronized, Synchronizing or NotSynchronizing (data movement
// suspended, or the secondary cut off from the primary).
func (g *AvailabilityGroup) SetSynchronizationState(in *Instance, db, state string) error {
	if _, ok := syncCodes[state]; !ok {
		return fmt.Errorf("sqlsim: synchronization state %q", state)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if r := g.replicaLocked(in); r != nil {
		r.sync[strings.ToLower(db)] = state
		return nil
	}
	return fmt.Errorf("sqlsim: %s is not a replica of availability group %s", in.cfg.Name, g.name)
}

func (g *AvailabilityGroup) replicaLocked(in *Instance) *agReplica {
	for _, r := range g.replicas {
		if r.in == in {
			return r
		}
	}
	return nil
}

// agState is what one instance knows of one of its databases' group.
type agState struct {
	g        *AvailabilityGroup
	replica  guid
	primary  bool
	readable bool
	sync     string
}

// agOf is the availability group state of database name on this instance;
// ok false when the database is not an availability database here.
func (in *Instance) agOf(name string) (agState, bool) {
	in.mu.Lock()
	g := in.ag
	in.mu.Unlock()
	if g == nil {
		return agState{}, false
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	member := false
	for _, db := range g.databases {
		member = member || in.sameName(db, name)
	}
	r := g.replicaLocked(in)
	if !member || r == nil {
		return agState{}, false
	}
	s := r.sync[strings.ToLower(name)]
	if s == "" {
		s = Synchronized
	}
	if r.primary {
		s = Synchronized
	}
	return agState{g: g, replica: r.id, primary: r.primary, readable: r.readable, sync: s}, true
}

// secondary reports whether d is a secondary database of a group here:
// read-only (3906 on a write, DATABASEPROPERTYEX Updateability READ_ONLY:
// "you cannot write data to secondary databases", "Offload read-only
// workload to secondary replica of an Always On availability group",
// https://learn.microsoft.com/en-us/sql/database-engine/availability-groups/windows/active-secondaries-readable-secondary-replicas-always-on-availability-groups).
func (in *Instance) secondary(d *database) bool {
	s, ok := in.agOf(d.Name)
	return ok && !s.primary
}

// errNotAccessible is 976: a secondary database of a replica that allows
// no connections (SECONDARY_ROLE (ALLOW_CONNECTIONS = NO)), or whose data
// movement is suspended, refuses every query, USE and login into it
// ("Offload read-only workload to secondary replica": a non-readable
// secondary is "not available for read access"; the error's text as SQL
// Server sends it, severity 14).
func errNotAccessible(db string) *tds.Error {
	return sqlErr(976, 14, "The target database, '%s', is participating in an availability group and is currently not accessible for queries. Either data movement is suspended or the availability replica is not enabled for read access. To allow read-only access to this and other databases in the availability group, enable read access to one or more secondary availability replicas in the group.  For more information, see the ALTER AVAILABILITY GROUP statement in SQL Server Books Online.", db)
}

// agAccess is 976 for a database whose contents this instance does not
// serve: a secondary that is not readable or not synchronizing; nil
// otherwise.
func (in *Instance) agAccess(d *database) *tds.Error {
	s, ok := in.agOf(d.Name)
	if !ok || s.primary || s.readable && s.sync != NotSynchronizing {
		return nil
	}
	return errNotAccessible(d.Name)
}

// agBackup is what a replica refuses of BACKUP DATABASE d ("Offload
// supported backups to secondary replicas of an availability group",
// https://learn.microsoft.com/en-us/sql/database-engine/availability-groups/windows/active-secondaries-backup-on-secondary-replicas-always-on-availability-groups):
// on a secondary "BACKUP DATABASE supports only copy-only full backups",
// else 3059 + 3013 (the text of KB4551221, "FIX: Error occurs when you try
// to create a differential backup on secondary replica in SQL Server");
// and "to back up a secondary database, a secondary replica must be able
// to communicate with the primary replica and must be SYNCHRONIZED or
// SYNCHRONIZING": the error SQL Server gives otherwise is not documented,
// the emulator answers 976 (data movement suspended) + 3013. A readable
// or non-readable secondary backs up alike: reads are not needed.
func (in *Instance) agBackup(d *database, copyOnly bool) error {
	s, ok := in.agOf(d.Name)
	if !ok || s.primary {
		return nil
	}
	if !copyOnly {
		return opError("BACKUP DATABASE", sqlErr(3059, 16, "This BACKUP or RESTORE command is not supported on a database mirror or secondary replica."))
	}
	if s.sync == NotSynchronizing || !s.g.primaryOnline() {
		return opError("BACKUP DATABASE", errNotAccessible(d.Name))
	}
	return nil
}

// primaryOnline reports whether the primary replica's instance runs.
func (g *AvailabilityGroup) primaryOnline() bool {
	g.mu.Lock()
	var p *Instance
	for _, r := range g.replicas {
		if r.primary {
			p = r.in
		}
	}
	g.mu.Unlock()
	return p != nil && p.up()
}

// up reports whether the instance runs (not stopped, not crashed).
func (in *Instance) up() bool {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.running
}

// preferredBackupReplica is sys.fn_hadr_backup_is_preferred_replica(db) on
// this instance
// (https://learn.microsoft.com/en-us/sql/relational-databases/system-functions/sys-fn-hadr-backup-is-preferred-replica-transact-sql):
// 1 for a database that is not part of an availability group; for a
// database that does not exist 0 from SQL Server 2019 CU20 and 2022 CU2
// on, 1 before. For an availability database the replicas that are online
// and have a BACKUP_PRIORITY above 0 are candidates as
// AUTOMATED_BACKUP_PREFERENCE says ("ALTER AVAILABILITY GROUP"): PRIMARY
// the primary; SECONDARY_ONLY the secondaries ("if the primary replica is
// the only replica online, the backup doesn't occur"); SECONDARY the
// secondaries, else the primary; NONE all. The candidate of the highest
// priority is preferred ("1 indicates the lowest priority, and 100
// indicates the highest"); a tie is not documented, the emulator prefers
// the replica whose instance name sorts first. The function looks at the
// role and the online state only, not at a database's synchronization
// state: a NOT SYNCHRONIZING secondary can be named, and its BACKUP then
// fails (agBackup); a backup job must check
// sys.dm_hadr_database_replica_states itself.
func (in *Instance) preferredBackupReplica(name string) int64 {
	if in.lookupDB(name) == nil {
		v := in.versionInfo()
		if in.cfg.MajorVersion >= 16 && v.num >= 4015 || in.cfg.MajorVersion == 15 && v.num >= 4312 {
			return 0
		}
		return 1
	}
	s, ok := in.agOf(name)
	if !ok {
		return 1
	}
	g := s.g
	g.mu.Lock()
	pref := g.preference
	type cand struct {
		in       *Instance
		primary  bool
		priority int
	}
	var all []cand
	for _, r := range g.replicas {
		all = append(all, cand{r.in, r.primary, r.priority})
	}
	g.mu.Unlock()
	var online []cand
	secondaries := 0
	for _, c := range all {
		if c.in.up() {
			online = append(online, c)
			if !c.primary {
				secondaries++
			}
		}
	}
	var cands []cand
	for _, c := range online {
		if c.priority <= 0 {
			continue
		}
		switch pref {
		case PreferPrimary:
			if !c.primary {
				continue
			}
		case PreferSecondaryOnly:
			if c.primary {
				continue
			}
		case PreferSecondary:
			if c.primary && secondaries > 0 {
				continue
			}
		}
		cands = append(cands, c)
	}
	if len(cands) == 0 {
		return 0
	}
	sort.SliceStable(cands, func(i, j int) bool {
		if cands[i].priority != cands[j].priority {
			return cands[i].priority > cands[j].priority
		}
		return strings.ToLower(cands[i].in.cfg.Name) < strings.ToLower(cands[j].in.cfg.Name)
	})
	if cands[0].in == in {
		return 1
	}
	return 0
}

// agView answers the availability group views the product reads, with
// their minimal columns:
//   - sys.availability_groups (group_id, name, automated_backup_preference,
//     automated_backup_preference_desc) and sys.availability_replicas
//     (replica_id, group_id, replica_server_name, backup_priority,
//     secondary_role_allow_connections, _desc): rows only with VIEW ANY
//     DEFINITION ("Requires VIEW ANY DEFINITION permission on the server
//     instance", sys.availability_groups), none otherwise;
//   - sys.dm_hadr_database_replica_states (database_id, group_id,
//     replica_id, group_database_id, is_local, is_primary_replica,
//     synchronization_state, _desc, is_suspended, database_state_desc): on
//     the primary a row for each of its databases and each secondary copy,
//     on a secondary its own databases' rows only ("On a secondary replica,
//     this view returns a row for every secondary database on the server
//     instance").
func (x *execCtx) agView(name, qual string) (*relation, bool, error) {
	rel := &relation{}
	x.in.mu.Lock()
	g := x.in.ag
	x.in.mu.Unlock()
	switch name {
	case "availability_groups":
		rel.cols = []relCol{col(qual, "group_id", tds.TypeUniqueIdentifier, 0), col(qual, "name", tds.TypeNVarChar, 128),
			col(qual, "automated_backup_preference", tds.TypeTinyInt, 0), col(qual, "automated_backup_preference_desc", tds.TypeNVarChar, 60)}
		if g == nil || !x.sessionLogin().hasServer("VIEW ANY DEFINITION") {
			return rel, true, nil
		}
		g.mu.Lock()
		rel.rows = append(rel.rows, []any{[16]byte(g.id), g.name, preferenceCodes[g.preference], g.preference})
		g.mu.Unlock()
	case "availability_replicas":
		rel.cols = []relCol{col(qual, "replica_id", tds.TypeUniqueIdentifier, 0), col(qual, "group_id", tds.TypeUniqueIdentifier, 0),
			col(qual, "replica_server_name", tds.TypeNVarChar, 256), col(qual, "backup_priority", tds.TypeInt, 0),
			col(qual, "secondary_role_allow_connections", tds.TypeTinyInt, 0), col(qual, "secondary_role_allow_connections_desc", tds.TypeNVarChar, 60)}
		if g == nil || !x.sessionLogin().hasServer("VIEW ANY DEFINITION") {
			return rel, true, nil
		}
		g.mu.Lock()
		for _, r := range g.replicas {
			allow, desc := int64(0), "NO"
			if r.readable {
				allow, desc = 2, "ALL"
			}
			rel.rows = append(rel.rows, []any{[16]byte(r.id), [16]byte(g.id), r.in.cfg.Name, int64(r.priority), allow, desc})
		}
		g.mu.Unlock()
	case "dm_hadr_database_replica_states":
		// VIEW SERVER STATE (VIEW SERVER PERFORMANCE STATE on 2022), https://learn.microsoft.com/en-us/sql/relational-databases/system-dynamic-management-views/sys-dm-hadr-database-replica-states-transact-sql#permissions
		if err := x.serverStateDenied(); err != nil {
			return nil, true, err
		}
		rel.cols = []relCol{col(qual, "database_id", tds.TypeInt, 0), col(qual, "group_id", tds.TypeUniqueIdentifier, 0),
			col(qual, "replica_id", tds.TypeUniqueIdentifier, 0), col(qual, "group_database_id", tds.TypeUniqueIdentifier, 0),
			col(qual, "is_local", tds.TypeBit, 0), col(qual, "is_primary_replica", tds.TypeBit, 0),
			col(qual, "synchronization_state", tds.TypeTinyInt, 0), col(qual, "synchronization_state_desc", tds.TypeNVarChar, 60),
			col(qual, "is_suspended", tds.TypeBit, 0), col(qual, "database_state_desc", tds.TypeNVarChar, 60)}
		if g == nil {
			return rel, true, nil
		}
		for _, d := range x.in.allDatabases() {
			s, ok := x.in.agOf(d.Name)
			if !ok {
				continue
			}
			gdb := [16]byte(x.in.familyGUID(&d))
			rel.rows = append(rel.rows, []any{int64(d.ID), [16]byte(g.id), [16]byte(s.replica), gdb, true, s.primary,
				syncCodes[s.sync], s.sync, s.sync == NotSynchronizing, "ONLINE"})
			if !s.primary {
				continue
			}
			g.mu.Lock()
			for _, r := range g.replicas {
				if r.in == x.in {
					continue
				}
				st := r.sync[strings.ToLower(d.Name)]
				if st == "" {
					st = Synchronized
				}
				rel.rows = append(rel.rows, []any{int64(d.ID), [16]byte(g.id), [16]byte(r.id), gdb, false, false,
					syncCodes[st], st, st == NotSynchronizing, nil})
			}
			g.mu.Unlock()
		}
	default:
		return nil, false, nil
	}
	return rel, true, nil
}
