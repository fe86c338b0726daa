package sqlsim

import (
	"strings"

	"github.com/backupcycle/backupcycle/internal/sqlsim/tds"
)

// WITH options that exclude each other. SQL Server refuses such a pair
// before doing anything: BACKUP and RESTORE with 3031 "Option 'x' conflicts
// with option(s) 'y'. Remove the conflicting option and reissue the
// statement." (option names in lower case, e.g. "Option 'norecovery'
// conflicts with option(s) 'keep_cdc'."), DBCC with 2559 "The 'x' and 'y'
// options are not allowed on the same statement."
// (https://learn.microsoft.com/en-us/sql/relational-databases/errors-events/database-engine-events-and-errors-3000-to-3999,
// .../database-engine-events-and-errors-2000-to-2999; DBCC CHECKDB's syntax
// has "{ PHYSICAL_ONLY | DATA_PURITY }",
// https://learn.microsoft.com/en-us/sql/t-sql/database-console-commands/dbcc-checkdb-transact-sql).
// An option given twice is refused the same way, naming it twice.

var backupOpposites = opposites(
	[2]string{"COMPRESSION", "NO_COMPRESSION"},
	[2]string{"INIT", "NOINIT"},
	[2]string{"FORMAT", "NOFORMAT"},
	[2]string{"CHECKSUM", "NO_CHECKSUM"},
	[2]string{"SKIP", "NOSKIP"},
	[2]string{"CONTINUE_AFTER_ERROR", "STOP_ON_ERROR"},
	[2]string{"COPY_ONLY", "DIFFERENTIAL"},
)

var restoreOpposites = opposites(
	[2]string{"RECOVERY", "NORECOVERY"},
	[2]string{"RECOVERY", "STANDBY"},
	[2]string{"NORECOVERY", "STANDBY"},
	[2]string{"CHECKSUM", "NO_CHECKSUM"},
	[2]string{"CONTINUE_AFTER_ERROR", "STOP_ON_ERROR"},
	// { ENABLE_BROKER | ERROR_BROKER_CONVERSATIONS | NEW_BROKER }: one of them.
	[2]string{"ENABLE_BROKER", "ERROR_BROKER_CONVERSATIONS"},
	[2]string{"ENABLE_BROKER", "NEW_BROKER"},
	[2]string{"ERROR_BROKER_CONVERSATIONS", "NEW_BROKER"},
)

var dbccOpposites = opposites(
	[2]string{"PHYSICAL_ONLY", "DATA_PURITY"},
)

func opposites(pairs ...[2]string) map[string][]string {
	m := map[string][]string{}
	for _, p := range pairs {
		m[p[0]] = append(m[p[0]], p[1])
		m[p[1]] = append(m[p[1]], p[0])
	}
	return m
}

// conflictingOption finds the first option (upper case, in statement
// order) that repeats an earlier one or excludes it; ok false when none.
func conflictingOption(order []string, opp map[string][]string) (later, earlier string, ok bool) {
	seen := map[string]bool{}
	for _, o := range order {
		if seen[o] {
			return o, o, true
		}
		for _, x := range opp[o] {
			if seen[x] {
				return o, x, true
			}
		}
		seen[o] = true
	}
	return "", "", false
}

// optionConflict is 3031 for the WITH options of a BACKUP or RESTORE.
func optionConflict(order []string, opp map[string][]string) *tds.Error {
	later, earlier, ok := conflictingOption(order, opp)
	if !ok {
		return nil
	}
	return sqlErr(3031, 16, "Option '%s' conflicts with option(s) '%s'. Remove the conflicting option and reissue the statement.",
		strings.ToLower(later), strings.ToLower(earlier))
}

// dbccOptionConflict is 2559 for the WITH options of DBCC CHECKDB.
func dbccOptionConflict(order []string) *tds.Error {
	later, earlier, ok := conflictingOption(order, dbccOpposites)
	if !ok {
		return nil
	}
	return sqlErr(2559, 16, "The '%s' and '%s' options are not allowed on the same statement.", earlier, later)
}
