package main

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/backupcycle/backupcycle/internal/config"
	"github.com/backupcycle/backupcycle/internal/mssql"
	"github.com/backupcycle/backupcycle/internal/selection"
	"github.com/backupcycle/backupcycle/internal/tsql"
)

// databasesReport is `starter databases --json`.
type databasesReport struct {
	Instances []instanceDatabases `json:"instances"`
}

type instanceDatabases struct {
	Instance string           `json:"instance"`
	Patterns []string         `json:"patterns,omitempty"`
	Selected []selectedDB     `json:"selected"`
	Skipped  []selection.Skip `json:"skipped"`
	// Error is why the instance could not be listed (then nothing else is set).
	Error string `json:"error,omitempty"`
}

type selectedDB struct {
	Name       string `json:"name"`
	Configured bool   `json:"configured"`      // an explicit databases: entry, else defaults
	Entry      string `json:"entry,omitempty"` // the entry's name when spelled otherwise than the database
	ReadOnly   bool   `json:"read_only,omitempty"`
	// Group is the availability group the database belongs to: it is
	// backed up as the group's, once, on the replica SQL Server prefers.
	Group    string   `json:"availability_group,omitempty"`
	Rotation []string `json:"backup_servers,omitempty"`
	CopyTo   string   `json:"copy_to,omitempty"`
	// Problem is why a cycle of it could not start (no rotation to inherit).
	Problem string `json:"problem,omitempty"`
}

// databasesCommand connects to each source instance and shows what its
// databases: selection resolves to now, and why every other database is
// skipped; exit 1 when an instance cannot be read or a selected database
// has no usable configuration.
func databasesCommand(e *env) *cobra.Command {
	var only string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "databases",
		Short: "show what each instance's databases: selection resolves to now (from sys.databases) and why every other database is skipped",
		Args:  noArgs,
		RunE: action(func(ctx context.Context, cmd *cobra.Command, args []string) error {
			cfg, err := e.requireConfig(cmd)
			if err != nil {
				return err
			}
			var names []string
			if only != "" {
				if _, ok := cfg.SQLInstance(only); !ok {
					var have []string
					for _, s := range cfg.SQLInstances {
						have = append(have, s.Name)
					}
					return usageError{msg: fmt.Sprintf("--instance %q is not defined in sql_instances of %s (defined: %s)", only, cfg.File, strings.Join(have, ", "))}
				}
				names = []string{only}
			} else {
				names = sourceInstances(cfg)
			}
			rep := databasesReport{Instances: []instanceDatabases{}}
			failed := 0
			for _, n := range names {
				r := resolveInstance(ctx, cfg, n)
				if r.Error != "" {
					failed++
				}
				for _, s := range r.Selected {
					if s.Problem != "" {
						failed++
					}
				}
				rep.Instances = append(rep.Instances, r)
			}
			if asJSON {
				if err := writeJSON(e.stdout, rep); err != nil {
					return err
				}
			} else {
				writeDatabases(e.stdout, rep)
			}
			if failed > 0 {
				return fmt.Errorf("%d problem(s) above: fix the configuration or the instance's reachability and run `starter databases` again", failed)
			}
			return nil
		}),
	}
	cmd.Flags().StringVar(&only, "instance", "", "show only this SQL instance (its sql_instances name); default: every instance with databases to back up")
	jsonFlag(cmd, &asJSON, "print the result")
	return cmd
}

// sourceInstances are the instances with a databases: selection or a
// database configured on them, in configuration order (verification-only
// instances have nothing to back up).
func sourceInstances(cfg *config.Config) []string {
	used := map[string]bool{}
	for _, d := range cfg.Databases {
		for _, src := range cfg.Sources(d.Instance) {
			used[src] = true
		}
	}
	var out []string
	for _, s := range cfg.SQLInstances {
		if len(s.Databases) > 0 || used[s.Name] {
			out = append(out, s.Name)
		}
	}
	return out
}

func resolveInstance(ctx context.Context, cfg *config.Config, name string) instanceDatabases {
	out := instanceDatabases{Instance: name, Selected: []selectedDB{}, Skipped: []selection.Skip{}}
	inst, _ := cfg.SQLInstance(name)
	out.Patterns = inst.Databases
	names, err := readNames(ctx, cfg, inst)
	if err != nil {
		out.Error = err.Error()
		return out
	}
	res, err := selection.ForInstance(cfg, name, names)
	if err != nil {
		out.Error = err.Error()
		return out
	}
	for _, s := range res.Selected {
		sd := selectedDB{Name: s.Name, Configured: s.Configured, Entry: s.Entry, ReadOnly: s.ReadOnly, Group: s.Group}
		key := name
		if s.Group != "" {
			key = s.Group
		}
		if db, err := selection.DatabaseFor(cfg, key, s.Name, s.Entry); err != nil {
			sd.Problem = err.Error()
		} else {
			sd.Rotation, sd.CopyTo = db.BackupServers, db.CopyTo
		}
		out.Selected = append(out.Selected, sd)
	}
	if res.Skipped != nil {
		out.Skipped = res.Skipped
	}
	return out
}

// readNames connects to master as the cycle does, reads sys.databases and
// resolves the names of the instance's databases: entries there.
func readNames(ctx context.Context, cfg *config.Config, inst *config.SQLInstance) (selection.Names, error) {
	t, err := mssql.TargetFor(*inst, "master")
	if err != nil {
		return selection.Names{}, err
	}
	t.AppName = "backupcycle databases"
	db, err := mssql.Open(ctx, t)
	if err != nil {
		return selection.Names{}, err
	}
	defer func() { _ = db.Close() }()
	return selection.ReadNames(ctx, db, selection.Asked(cfg, inst.Name))
}

func writeDatabases(w io.Writer, rep databasesReport) {
	for i, r := range rep.Instances {
		if i > 0 {
			fmt.Fprintln(w)
		}
		sel := "none: only the databases configured by name"
		if len(r.Patterns) > 0 {
			sel = strings.Join(r.Patterns, ", ")
		}
		fmt.Fprintf(w, "SQL instance %s (databases: %s)\n", r.Instance, sel)
		if r.Error != "" {
			fmt.Fprintf(w, "  ERROR     %s\n", r.Error)
			continue
		}
		for _, s := range r.Selected {
			how := "defaults"
			if s.Configured {
				how = "configured"
				if s.Entry != "" {
					how = "configured as " + tsql.Printable(s.Entry)
				}
			}
			if s.ReadOnly {
				how += ", read-only"
			}
			if s.Group != "" {
				how += ", group " + s.Group
			}
			where := ""
			switch {
			case s.Problem != "":
				where = "PROBLEM: " + s.Problem
			case len(s.Rotation) > 0:
				where = "-> " + strings.Join(s.Rotation, ", ")
				if s.CopyTo != "" {
					where += ", copy to " + s.CopyTo
				}
			}
			fmt.Fprintf(w, "  selected  %-30s %-22s %s\n", tsql.Printable(s.Name), how, tsql.Printable(where))
		}
		for _, s := range r.Skipped {
			fmt.Fprintf(w, "  skipped   %-30s %s\n", tsql.Printable(s.Name), tsql.Printable(s.Reason))
		}
		fmt.Fprintf(w, "  %d selected, %d skipped\n", len(r.Selected), len(r.Skipped))
	}
}
