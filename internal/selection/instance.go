package selection

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/backupcycle/backupcycle/internal/config"
	"github.com/backupcycle/backupcycle/internal/mssql"
	"github.com/backupcycle/backupcycle/internal/tsql"
)

// List reads an instance's databases (tsql.DatabasesQuery).
func List(ctx context.Context, db *mssql.DB) ([]Database, error) {
	const op = "list databases (sys.databases)"
	rows, err := db.QueryContext(ctx, tsql.DatabasesQuery)
	if err != nil {
		return nil, mssql.Classify(db.Target, op, err)
	}
	defer rows.Close()
	var out []Database
	for rows.Next() {
		var (
			d       Database
			state   sql.NullString
			source  sql.NullInt64
			ro      sql.NullBool
			replica []byte
			ag      sql.NullString
		)
		if err := rows.Scan(&d.Name, &d.ID, &state, &source, &ro, &replica, &ag); err != nil {
			return nil, mssql.Classify(db.Target, op, err)
		}
		d.State = strings.TrimSpace(state.String)
		d.IsSnapshot = source.Valid
		d.ReadOnly = ro.Bool
		d.InAvailabilityGroup, d.AvailabilityGroup = replica != nil, ag.String
		d.IsSystem = SystemDatabase(d.Name)
		out = append(out, d)
	}
	if err := rows.Err(); err != nil {
		return nil, mssql.Classify(db.Target, op, err)
	}
	return out, nil
}

// Names is how one instance resolves database names: its databases
// (sys.databases) and the database_id each name asked about names there
// (DB_ID: by the server collation, trailing blanks ignored). On a
// case-insensitive instance sales names the database Sales; on a
// case-sensitive (SAP estates: BIN2) one it names only a database sales.
type Names struct {
	Databases []Database
	// IDs maps each name asked about to its database_id; a name that names
	// no database is absent.
	IDs map[string]int64
}

// ReadNames lists an instance's databases (List) and resolves names there
// (tsql.DatabaseIDs).
func ReadNames(ctx context.Context, db *mssql.DB, names []string) (Names, error) {
	dbs, err := List(ctx, db)
	if err != nil {
		return Names{}, err
	}
	out := Names{Databases: dbs, IDs: map[string]int64{}}
	for len(names) > 0 {
		chunk := names[:min(len(names), 1000)]
		names = names[len(chunk):]
		q, args, err := tsql.DatabaseIDs(chunk)
		if err != nil {
			return Names{}, err
		}
		ids := make([]sql.NullInt64, len(chunk))
		dest := make([]any, len(chunk))
		for i := range ids {
			dest[i] = &ids[i]
		}
		if err := db.QueryRowContext(ctx, q, args...).Scan(dest...); err != nil {
			return Names{}, mssql.Classify(db.Target, "resolve database names (DB_ID)", err)
		}
		for i, id := range ids {
			if id.Valid {
				out.IDs[chunk[i]] = id.Int64
			}
		}
	}
	return out, nil
}

// Asked are the names to resolve on instance for a start of names: those
// and the names of the instance's databases: entries, each once; for a
// replica of an availability group, the entries on the group and on its
// other replicas too (they may name its availability databases).
func Asked(cfg *config.Config, instance string, names ...string) []string {
	out := slices.Clone(names)
	g, replica := cfg.GroupOf(instance)
	for _, c := range cfg.Databases {
		if c.Instance == instance || replica && inGroup(g, c.Instance) {
			out = append(out, c.Name)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// byID is the database with that database_id.
func (n Names) byID(id int64) (Database, bool) {
	for _, d := range n.Databases {
		if d.ID == id {
			return d, true
		}
	}
	return Database{}, false
}

// NoSuchDatabaseError is Canonical's (and Resolve's) error when the
// instance has no database of the name started.
type NoSuchDatabaseError struct{ msg string }

func (e *NoSuchDatabaseError) Error() string { return e.msg }

// Canonical is the database the instance takes name to mean, with its
// sys.databases spelling. The error of a name that names none is a
// NoSuchDatabaseError naming the databases spelled the same but for case:
// on a case-sensitive instance those are other databases.
func (n Names) Canonical(instance, name string) (Database, error) {
	if id, ok := n.IDs[name]; ok {
		if d, ok := n.byID(id); ok {
			return d, nil
		}
	}
	var near []string
	for _, d := range n.Databases {
		if strings.EqualFold(d.Name, name) {
			near = append(near, "'"+tsql.Printable(d.Name)+"'")
		}
	}
	shown := "'" + tsql.Printable(name) + "'"
	if len(near) > 0 {
		return Database{}, &NoSuchDatabaseError{fmt.Sprintf("database %s not found on SQL instance %s, only %s: the instance compares names case-sensitively (its server collation), so these are other databases; check the database name in the configuration or the start and give the exact one",
			shown, instance, strings.Join(near, " and "))}
	}
	return Database{}, &NoSuchDatabaseError{fmt.Sprintf("database %s not found on SQL instance %s (sys.databases): check the database name in the configuration or the start", shown, instance)}
}

// entryFor is the name of the databases: entry of instance that names
// database id there ("" for none). Two entries naming one database (Cafe
// and Café under an accent-insensitive collation) are refused.
func (n Names) entryFor(cfg *config.Config, instance string, id int64) (string, error) {
	var found []string
	for _, c := range cfg.Databases {
		if got, ok := n.IDs[c.Name]; ok && got == id && c.Instance == instance {
			found = append(found, c.Name)
		}
	}
	switch len(found) {
	case 0:
		return "", nil
	case 1:
		return found[0], nil
	}
	return "", fmt.Errorf("the databases: entries %q all name one database on %s (it compares them by its collation): keep one in %s", found, instance, cfg.File)
}

// Resolve is the configuration a cycle of name on instance runs with,
// name resolved as the instance resolves it: Name is the database's
// sys.databases spelling (Sales for a start of sales on a case-insensitive
// instance), and the databases: entry that names the same database there,
// in whatever case, supplies the settings (Entry records its spelling when
// it differs); without one, a database the instance's selection picks gets
// DatabaseFor's defaults. Names with a leading or trailing blank are
// refused, started or found.
func (n Names) Resolve(cfg *config.Config, instance, name string) (config.Database, error) {
	if err := config.CheckDatabaseName(name); err != nil {
		return config.Database{}, err
	}
	d, err := n.Canonical(instance, name)
	if err != nil {
		return config.Database{}, err
	}
	if err := config.CheckDatabaseName(d.Name); err != nil {
		return config.Database{}, fmt.Errorf("%s resolves %q to its database %q: %w", instance, name, d.Name, err)
	}
	if g, ok := GroupOf(cfg, instance, d); ok {
		// An availability database: the group's, under its entry on the
		// group or any replica.
		e, err := n.groupEntryFor(cfg, g, d.ID)
		if err != nil {
			return config.Database{}, err
		}
		entry := ""
		if e != nil {
			entry = e.Name
		}
		db, err := configuredInGroup(cfg, g, d.Name, entry)
		if err != nil {
			return config.Database{}, fmt.Errorf("%s resolves %q to its database %q of availability group %s, which %w", instance, name, d.Name, g.Name, err)
		}
		return *db, nil
	}
	entry, err := n.entryFor(cfg, instance, d.ID)
	if err != nil {
		return config.Database{}, err
	}
	if entry == "" && !Selects(cfg, instance, d.Name) {
		_, err := cfg.Database(instance, d.Name)
		return config.Database{}, fmt.Errorf("%s resolves %q to its database %q, which %w", instance, name, d.Name, err)
	}
	return DatabaseFor(cfg, instance, d.Name, entry)
}

// Result is what one instance's databases resolve to.
type Result struct {
	Instance string `json:"instance"`
	// Patterns is the instance's databases: selection (empty: only the
	// databases configured by name).
	Patterns []string   `json:"patterns,omitempty"`
	Selected []Selected `json:"selected"`
	Skipped  []Skip     `json:"skipped"`
}

// Selected is one database a night's run backs up, and where its settings
// come from.
type Selected struct {
	Name string `json:"name"`
	// Configured: an explicit databases: entry sets its settings; otherwise
	// it inherits defaults: (see DatabaseFor).
	Configured bool `json:"configured"`
	// Entry is the configured entry's name when it is spelled otherwise
	// than the database (the instance resolved it to this database).
	Entry    string `json:"entry,omitempty"`
	ReadOnly bool   `json:"read_only,omitempty"`
	// Group is the availability group the database belongs to (GroupOf):
	// it is backed up as the group's, once for all its replicas.
	Group string `json:"availability_group,omitempty"`
}

// ForInstance resolves one configured instance: its databases: selection
// plus every database configured for it under databases: (an explicit
// entry is backed up even when the selection would not pick it, as long as
// it is ONLINE). n holds the instance's databases and what the entries'
// names resolve to there (ReadNames with Asked): an entry names the
// database the instance takes its name to mean, by its collation.
func ForInstance(cfg *config.Config, instance string, n Names) (Result, error) {
	inst, ok := cfg.SQLInstance(instance)
	if !ok {
		return Result{}, fmt.Errorf("instance %q is not defined in sql_instances of %s", instance, cfg.File)
	}
	r := Result{Instance: instance, Patterns: inst.Databases}
	selected, skipped := Resolve(inst.Databases, n.Databases)
	explicit := map[int64]string{} // database_id -> entry name
	chosen := map[string]bool{}
	for _, s := range selected {
		chosen[s] = true
	}
	// Explicit entries join the selection when the database can be backed
	// up; on a replica, the entries on its group and its other replicas
	// when they name one of the group's databases here.
	g, replica := cfg.GroupOf(instance)
	for _, c := range cfg.Databases {
		own := c.Instance == instance
		if !own && !(replica && inGroup(g, c.Instance)) {
			continue
		}
		id, found := n.IDs[c.Name]
		d, _ := n.byID(id)
		if !own {
			if gg, ok := GroupOf(cfg, instance, d); !found || !ok || gg != g {
				continue
			}
		}
		if found {
			if other, dup := explicit[id]; dup {
				skipped = append(skipped, Skip{Name: c.Name, Reason: fmt.Sprintf("configured under databases: but names the database %q, as %q does: keep one entry", d.Name, other)})
				continue
			}
			explicit[id] = c.Name
		}
		switch {
		case !found:
			skipped = append(skipped, Skip{Name: c.Name, Reason: "configured under databases: but the instance has no such database"})
		case chosen[d.Name]:
		case Ineligible(d) != "":
		case !strings.EqualFold(d.State, "ONLINE"):
			skipped = replaceSkip(skipped, Skip{Name: d.Name, Reason: fmt.Sprintf("state %s: only ONLINE databases can be backed up; selected again once it is ONLINE", d.State)})
		default:
			selected = append(selected, d.Name)
			chosen[d.Name] = true
		}
	}
	sort.SliceStable(selected, func(i, j int) bool { return nameLess(selected[i], selected[j]) })
	byName := map[string]Database{}
	for _, d := range n.Databases {
		byName[d.Name] = d
	}
	for _, name := range selected {
		d := byName[name]
		s := Selected{Name: name, ReadOnly: d.ReadOnly}
		if g, ok := GroupOf(cfg, instance, d); ok {
			s.Group = g.Name
		}
		if e, ok := explicit[d.ID]; ok {
			s.Configured = true
			if e != name {
				s.Entry = e
			}
		}
		r.Selected = append(r.Selected, s)
	}
	for _, s := range skipped {
		if !chosen[s.Name] {
			r.Skipped = append(r.Skipped, s)
		}
	}
	return r, nil
}

// replaceSkip sets the reason of a skipped name (a configured database
// reported as "not selected" is skipped for its state instead).
func replaceSkip(skipped []Skip, s Skip) []Skip {
	for i := range skipped {
		if skipped[i].Name == s.Name {
			skipped[i] = s
			return skipped
		}
	}
	return append(skipped, s)
}

// DatabaseFor is the configuration database name of an instance is backed
// up with: the databases: entry named entry (its settings, under name:
// the database's sys.databases spelling, Entry recording the entry's when
// it differs), or, with entry "", an entry spelled exactly name, else the
// defaults: policy under the database's own name, with the instance's
// rotation (sql_instances[].backup_servers, copy_to) or, without one, the
// rotation the instance's configured databases share. Sanity checks are
// never inherited: their queries are per database.
//
// instance may be an availability group's name: the entry is then looked
// for on the group and its replicas, and the database is keyed by the
// group (groupDatabaseFor).
func DatabaseFor(cfg *config.Config, instance, name, entry string) (config.Database, error) {
	if g, ok := cfg.AvailabilityGroup(instance); ok {
		db, _, err := groupDatabaseFor(cfg, g, name, entry)
		return db, err
	}
	if entry == "" {
		entry = name
	}
	var peers []*config.Database
	for i := range cfg.Databases {
		c := &cfg.Databases[i]
		if c.Instance != instance {
			continue
		}
		if c.Name == entry {
			db := *c
			if db.Name != name {
				db.Name, db.Entry = name, entry
			}
			return db, nil
		}
		peers = append(peers, c)
	}
	inst, ok := cfg.SQLInstance(instance)
	if !ok {
		return config.Database{}, fmt.Errorf("instance %q is not defined in sql_instances of %s", instance, cfg.File)
	}
	if entry != name {
		return config.Database{}, fmt.Errorf("database %q on %s: no databases: entry %q in %s", name, instance, entry, cfg.File)
	}
	db := config.Database{Name: name, Instance: instance, Policy: cfg.Defaults}
	if len(inst.BackupServers) > 0 {
		db.BackupServers, db.CopyTo = append([]string(nil), inst.BackupServers...), inst.CopyTo
		return db, nil
	}
	for _, p := range peers {
		switch {
		case db.BackupServers == nil:
			db.BackupServers, db.CopyTo = append([]string(nil), p.BackupServers...), p.CopyTo
		case strings.Join(db.BackupServers, "\x00") != strings.Join(p.BackupServers, "\x00") || db.CopyTo != p.CopyTo:
			return config.Database{}, fmt.Errorf("database %q on %s is selected by sql_instances[].databases but the databases configured on %s use different backup_servers/copy_to, so its rotation is ambiguous: set sql_instances[].backup_servers on %s, or add a databases: entry for %q with its backup_servers", name, instance, instance, instance, name)
		}
	}
	if len(db.BackupServers) == 0 {
		return config.Database{}, fmt.Errorf("database %q on %s is selected by sql_instances[].databases but there is no rotation to inherit: set sql_instances[].backup_servers on %s, or add a databases: entry (name, instance %s, backup_servers) for it", name, instance, instance, instance)
	}
	return db, nil
}

// Selects reports whether the instance's databases: selection picks name,
// judged by the name alone (the state is checked when the night runs); for
// an availability group, whether any replica's does.
func Selects(cfg *config.Config, instance, name string) bool {
	if g, ok := cfg.AvailabilityGroup(instance); ok {
		return slices.ContainsFunc(g.Replicas, func(r string) bool { return Selects(cfg, r, name) })
	}
	inst, ok := cfg.SQLInstance(instance)
	if !ok || len(inst.Databases) == 0 {
		return false
	}
	sel, _ := Resolve(inst.Databases, []Database{{Name: name, State: "ONLINE", IsSystem: SystemDatabase(name)}})
	return len(sel) == 1
}

// Lookup is the configuration of one database by the configuration alone,
// for callers that do not ask the instance (the starter, schedules, plans
// from manifests): its databases: entry, or, for a database an instance's
// selection picks, DatabaseFor. A name spelled otherwise than its entry
// (sales for the entry Sales) finds the entry, as it names that database
// on a case-insensitive instance, the default; the cycle itself resolves
// the name on the instance (Names.Resolve) and refuses it where the
// instance compares case-sensitively. Names with a leading or trailing
// blank are refused. The error of a database neither configured nor
// selected is config.Database's.
func Lookup(cfg *config.Config, instance, name string) (*config.Database, error) {
	if err := config.CheckDatabaseName(name); err != nil {
		return nil, err
	}
	if g, ok := cfg.AvailabilityGroup(instance); ok {
		if e := foldedGroupEntry(cfg, g, name); e != nil {
			return e, nil
		}
		return configuredInGroup(cfg, g, name, "")
	}
	db, err := cfg.Database(instance, name)
	if err == nil {
		return db, nil
	}
	if e, ferr := foldedEntry(cfg, instance, name); e != nil || ferr != nil {
		return e, ferr
	}
	if instance != "" && Selects(cfg, instance, name) {
		sel, serr := DatabaseFor(cfg, instance, name, "")
		if serr != nil {
			return nil, serr
		}
		return &sel, nil
	}
	// A start through a replica of a database the configuration knows
	// only as its availability group's: the group's (the cycle confirms
	// it on the replicas).
	if g, ok := cfg.GroupOf(instance); ok {
		if e := foldedGroupEntry(cfg, g, name); e != nil {
			return e, nil
		}
		if Selects(cfg, g.Name, name) {
			return configuredInGroup(cfg, g, name, "")
		}
	}
	return db, err
}

// foldedEntry is the entry spelled as name but for case, on instance (any
// instance when ""); nil when there is none, an error when entries on
// several instances match.
func foldedEntry(cfg *config.Config, instance, name string) (*config.Database, error) {
	var found []*config.Database
	for i := range cfg.Databases {
		c := &cfg.Databases[i]
		if strings.EqualFold(c.Name, name) && (instance == "" || c.Instance == instance) {
			found = append(found, c)
		}
	}
	return theOne(found, func() error {
		return fmt.Errorf("database %q is configured on several instances in %s (as %s/%s and %s/%s): name the instance too",
			name, cfg.File, found[0].Instance, found[0].Name, found[1].Instance, found[1].Name)
	})
}

// Configured is the configuration of a database whose name a cycle's plan
// has resolved on its instance (Names.Resolve): name is its sys.databases
// spelling, entry the databases: entry it is backed up with when spelled
// otherwise ("" when the entry is spelled exactly name, or for a database
// the selection picks). Unlike Lookup it never matches an entry by case
// alone: on a case-sensitive instance the entry Sales does not name sales.
func Configured(cfg *config.Config, instance, name, entry string) (*config.Database, error) {
	if err := config.CheckDatabaseName(name); err != nil {
		return nil, err
	}
	if g, ok := cfg.AvailabilityGroup(instance); ok {
		return configuredInGroup(cfg, g, name, entry)
	}
	if entry != "" {
		db, err := DatabaseFor(cfg, instance, name, entry)
		if err != nil {
			return nil, err
		}
		return &db, nil
	}
	db, err := cfg.Database(instance, name)
	if err == nil || instance == "" || !Selects(cfg, instance, name) {
		return db, err
	}
	sel, serr := DatabaseFor(cfg, instance, name, "")
	if serr != nil {
		return nil, serr
	}
	return &sel, nil
}
