package selection

import (
	"context"
	"database/sql"
	"fmt"
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
			d      Database
			state  sql.NullString
			source sql.NullInt64
			ro     sql.NullBool
		)
		if err := rows.Scan(&d.Name, &d.ID, &state, &source, &ro); err != nil {
			return nil, mssql.Classify(db.Target, op, err)
		}
		d.State = strings.TrimSpace(state.String)
		d.IsSnapshot = source.Valid
		d.ReadOnly = ro.Bool
		d.IsSystem = SystemDatabase(d.Name)
		out = append(out, d)
	}
	if err := rows.Err(); err != nil {
		return nil, mssql.Classify(db.Target, op, err)
	}
	return out, nil
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
	ReadOnly   bool `json:"read_only,omitempty"`
}

// ForInstance resolves one configured instance: its databases: selection
// plus every database configured for it by name under databases: (an
// explicit entry is backed up even when the selection would not pick it,
// as long as it is ONLINE).
func ForInstance(cfg *config.Config, instance string, dbs []Database) (Result, error) {
	inst, ok := cfg.SQLInstance(instance)
	if !ok {
		return Result{}, fmt.Errorf("instance %q is not defined in sql_instances of %s", instance, cfg.File)
	}
	r := Result{Instance: instance, Patterns: inst.Databases}
	selected, skipped := Resolve(inst.Databases, dbs)
	byName := map[string]Database{}
	for _, d := range dbs {
		byName[strings.ToLower(d.Name)] = d
	}
	explicit := map[string]bool{}
	for _, c := range cfg.Databases {
		if c.Instance == instance {
			explicit[strings.ToLower(c.Name)] = true
		}
	}
	chosen := map[string]bool{}
	for _, n := range selected {
		chosen[strings.ToLower(n)] = true
	}
	// Explicit entries join the selection when the database can be backed up.
	for _, c := range cfg.Databases {
		if c.Instance != instance || chosen[strings.ToLower(c.Name)] {
			continue
		}
		d, found := byName[strings.ToLower(c.Name)]
		switch {
		case !found:
			skipped = append(skipped, Skip{Name: c.Name, Reason: "configured under databases: but the instance has no such database"})
		case Ineligible(d) != "":
		case !strings.EqualFold(d.State, "ONLINE"):
			skipped = replaceSkip(skipped, Skip{Name: d.Name, Reason: fmt.Sprintf("state %s: only ONLINE databases can be backed up; selected again once it is ONLINE", d.State)})
		default:
			selected = append(selected, d.Name)
			chosen[strings.ToLower(d.Name)] = true
		}
	}
	sort.SliceStable(selected, func(i, j int) bool { return nameLess(selected[i], selected[j]) })
	for _, n := range selected {
		d := byName[strings.ToLower(n)]
		r.Selected = append(r.Selected, Selected{Name: n, Configured: explicit[strings.ToLower(n)], ReadOnly: d.ReadOnly})
	}
	for _, s := range skipped {
		if !chosen[strings.ToLower(s.Name)] {
			r.Skipped = append(r.Skipped, s)
		}
	}
	return r, nil
}

// replaceSkip sets the reason of a skipped name (a configured database
// reported as "not selected" is skipped for its state instead).
func replaceSkip(skipped []Skip, s Skip) []Skip {
	for i := range skipped {
		if strings.EqualFold(skipped[i].Name, s.Name) {
			skipped[i] = s
			return skipped
		}
	}
	return append(skipped, s)
}

// DatabaseFor is the configuration a database of an instance is backed up
// with: its explicit databases: entry when there is one (unchanged), else
// the defaults: policy under the database's own name, with the instance's
// rotation (sql_instances[].backup_servers, copy_to) or, without one, the
// rotation the instance's configured databases share. Sanity checks are
// never inherited: their queries are per database.
func DatabaseFor(cfg *config.Config, instance, name string) (config.Database, error) {
	var peers []*config.Database
	for i := range cfg.Databases {
		c := &cfg.Databases[i]
		if c.Instance != instance {
			continue
		}
		if c.Name == name {
			return *c, nil
		}
		peers = append(peers, c)
	}
	inst, ok := cfg.SQLInstance(instance)
	if !ok {
		return config.Database{}, fmt.Errorf("instance %q is not defined in sql_instances of %s", instance, cfg.File)
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
// judged by the name alone (the state is checked when the night runs).
func Selects(cfg *config.Config, instance, name string) bool {
	inst, ok := cfg.SQLInstance(instance)
	if !ok || len(inst.Databases) == 0 {
		return false
	}
	sel, _ := Resolve(inst.Databases, []Database{{Name: name, State: "ONLINE", IsSystem: SystemDatabase(name)}})
	return len(sel) == 1
}

// Lookup is the configuration of one database: its databases: entry, or,
// for a database an instance's selection picks, DatabaseFor. The error of
// a database neither configured nor selected is config.Database's.
func Lookup(cfg *config.Config, instance, name string) (*config.Database, error) {
	db, err := cfg.Database(instance, name)
	if err == nil || instance == "" || !Selects(cfg, instance, name) {
		return db, err
	}
	sel, serr := DatabaseFor(cfg, instance, name)
	if serr != nil {
		return nil, serr
	}
	return &sel, nil
}
