// Package selection resolves an instance's `databases:` selection
// (sql_instances[].databases: [USER_DATABASES, -DBA, "Sales*"]) against the
// databases the instance has now, so a database created after the
// configuration was written is backed up the next night without a change.
//
// The semantics are those of Ola Hallengren's DatabaseBackup @Databases
// (https://ola.hallengren.com/sql-server-backup.html; DatabaseBackup.sql
// marks the databases every inclusion matches, then unmarks those any
// exclusion matches): the order of the items does not matter and an
// exclusion always wins. tempdb and database snapshots are never selected,
// and only ONLINE databases are backed up; every other database is reported
// with the reason it is skipped.
package selection

import (
	"fmt"
	"sort"
	"strings"
	"unicode"

	"github.com/backupcycle/backupcycle/internal/config"
)

// Database is one row of sys.databases (tsql.DatabasesQuery).
type Database struct {
	Name string `json:"name"`
	ID   int64  `json:"database_id"`
	// State is sys.databases.state_desc: ONLINE, RESTORING, RECOVERING,
	// RECOVERY_PENDING, SUSPECT, EMERGENCY, OFFLINE, COPYING, OFFLINE_SECONDARY.
	State      string `json:"state"`
	IsSnapshot bool   `json:"is_snapshot"` // source_database_id is not NULL
	ReadOnly   bool   `json:"read_only"`
	IsSystem   bool   `json:"is_system"` // master, model, msdb or tempdb
	// InAvailabilityGroup: sys.databases.replica_id is set, the database
	// is an availability database on this instance; AvailabilityGroup is
	// its group's name (sys.availability_groups), "" when the login may
	// not see it (VIEW ANY DEFINITION).
	InAvailabilityGroup bool   `json:"in_availability_group,omitempty"`
	AvailabilityGroup   string `json:"availability_group,omitempty"`
}

// Skip is a database that is not backed up, and why.
type Skip struct {
	Name   string `json:"name"`
	Reason string `json:"reason"`
	// Unasked: no item of the selection asks for it (or it is tempdb),
	// as opposed to one excluded, not ONLINE, a snapshot or missing.
	Unasked bool `json:"unasked,omitempty"`
}

// SystemDatabase reports whether name is one of SQL Server's system
// databases (master, model, msdb, tempdb); SYSTEM_DATABASES selects the
// first three, as in DatabaseBackup.
func SystemDatabase(name string) bool {
	switch strings.ToLower(name) {
	case "master", "model", "msdb", "tempdb":
		return true
	}
	return false
}

// Match reports whether name matches pattern, where * is any run of
// characters and ? one character. Names compare case-insensitively, as
// under SQL Server's default collation (SQL_Latin1_General_CP1_CI_AS;
// https://learn.microsoft.com/en-us/sql/relational-databases/collations/collation-and-unicode-support).
func Match(pattern, name string) bool {
	p, n := []rune(pattern), []rune(name)
	// Iterative glob with one backtrack point: linear in practice, no
	// exponential blow-up on patterns like "*a*a*a*".
	pi, ni, star, mark := 0, 0, -1, 0
	for ni < len(n) {
		switch {
		case pi < len(p) && p[pi] == '*':
			star, mark = pi, ni
			pi++
		case pi < len(p) && (p[pi] == '?' || foldEq(p[pi], n[ni])):
			pi++
			ni++
		case star >= 0:
			pi = star + 1
			mark++
			ni = mark
		default:
			return false
		}
	}
	for pi < len(p) && p[pi] == '*' {
		pi++
	}
	return pi == len(p)
}

func foldEq(a, b rune) bool {
	return a == b || unicode.ToLower(a) == unicode.ToLower(b) || unicode.ToUpper(a) == unicode.ToUpper(b)
}

// matches reports whether one selection item covers db.
func matches(it config.SelectionItem, db Database) bool {
	switch it.Keyword {
	case config.AllDatabases:
		return true
	case config.SystemDatabases:
		return db.IsSystem
	case config.UserDatabases:
		return !db.IsSystem
	}
	return Match(it.Pattern, db.Name)
}

func hasWildcard(p string) bool { return strings.ContainsAny(p, "*?") }

// Resolve applies a selection to an instance's databases. selected is in
// name order (case-insensitive, then byte order); skipped names every
// other database with its reason, and every name written without a
// wildcard that no database has. Items that do not parse (config.Parse
// has already refused them) are reported as skipped too.
func Resolve(patterns []string, dbs []Database) (selected []string, skipped []Skip) {
	var inc, exc []config.SelectionItem
	for _, p := range patterns {
		it, err := config.ParseSelectionItem(p)
		if err != nil {
			skipped = append(skipped, Skip{Name: p, Reason: fmt.Sprintf("selection item %q %v", p, err)})
			continue
		}
		if it.Exclude {
			exc = append(exc, it)
		} else {
			inc = append(inc, it)
		}
	}
	sorted := append([]Database(nil), dbs...)
	sort.SliceStable(sorted, func(i, j int) bool { return nameLess(sorted[i].Name, sorted[j].Name) })

	for _, db := range sorted {
		if r := Ineligible(db); r != "" {
			skipped = append(skipped, Skip{Name: db.Name, Reason: r, Unasked: strings.EqualFold(db.Name, "tempdb")})
			continue
		}
		var by *config.SelectionItem
		for i := range inc {
			if matches(inc[i], db) {
				by = &inc[i]
				break
			}
		}
		if by == nil {
			why := "not selected: no item of databases: matches it"
			if len(patterns) == 0 {
				why = "not selected: the instance has no databases: selection"
			}
			skipped = append(skipped, Skip{Name: db.Name, Reason: why, Unasked: true})
			continue
		}
		excluded := ""
		for _, e := range exc {
			if matches(e, db) {
				excluded = e.Text
				break
			}
		}
		if excluded != "" {
			skipped = append(skipped, Skip{Name: db.Name, Reason: fmt.Sprintf("excluded by %q", excluded)})
			continue
		}
		if !strings.EqualFold(db.State, "ONLINE") {
			skipped = append(skipped, Skip{Name: db.Name, Reason: fmt.Sprintf("state %s: only ONLINE databases can be backed up; selected again once it is ONLINE", db.State)})
			continue
		}
		selected = append(selected, db.Name)
	}
	// A name written out that the instance does not have is worth saying:
	// DatabaseBackup reports it too, and it is usually a typo.
	for _, it := range inc {
		if it.Keyword != "" || hasWildcard(it.Pattern) {
			continue
		}
		found := false
		for _, db := range dbs {
			if strings.EqualFold(db.Name, it.Pattern) {
				found = true
				break
			}
		}
		if !found {
			skipped = append(skipped, Skip{Name: it.Pattern, Reason: "listed in databases: but the instance has no such database"})
		}
	}
	return selected, skipped
}

// Ineligible is why a database can never be backed up by a cycle whatever
// the selection says, or "".
func Ineligible(db Database) string {
	switch {
	case strings.EqualFold(db.Name, "tempdb"):
		// https://learn.microsoft.com/en-us/sql/relational-databases/backup-restore/back-up-and-restore-of-system-databases-sql-server:
		// the tempdb system database cannot be backed up.
		return "tempdb cannot be backed up (SQL Server recreates it at every start)"
	case db.IsSnapshot:
		// https://learn.microsoft.com/en-us/sql/relational-databases/databases/database-snapshots-sql-server:
		// database snapshots cannot be backed up or restored.
		return "database snapshot (source_database_id is set): snapshots cannot be backed up"
	case config.CheckDatabaseName(db.Name) != nil:
		return "its name has a leading or trailing blank: SQL Server ignores trailing blanks when it compares names, so no start can name it apart from the name without them; rename the database to back it up"
	}
	return ""
}

// nameLess orders names case-insensitively, ties broken byte-wise so the
// order is total and stable.
func nameLess(a, b string) bool {
	la, lb := strings.ToLower(a), strings.ToLower(b)
	if la != lb {
		return la < lb
	}
	return a < b
}
