package tsql

import (
	"fmt"
	"strings"
)

// PageVerify asks how database db verifies its pages
// (sys.databases.page_verify_option_desc: CHECKSUM, TORN_PAGE_DETECTION or
// NONE). BACKUP WITH CHECKSUM verifies the checksum of every page that
// carries one; pages of a database on TORN_PAGE_DETECTION or NONE carry
// none ("BACKUP (Transact-SQL)", CHECKSUM; "ALTER DATABASE SET Options",
// PAGE_VERIFY).
func PageVerify(db string) (string, []any, error) {
	if err := CheckIdent(db); err != nil {
		return "", nil, fmt.Errorf("PAGE_VERIFY of %q: %w", db, err)
	}
	return "SELECT page_verify_option_desc FROM sys.databases WHERE name = @p1", []any{db}, nil
}

// PageVerifyChecksum is the fix for a database whose pages carry no
// checksum: pages get one as they are next written (existing ones keep
// none until then).
func PageVerifyChecksum(db string) (string, error) {
	q, err := QuoteIdent(db)
	if err != nil {
		return "", fmt.Errorf("PAGE_VERIFY of %q: %w", db, err)
	}
	return "ALTER DATABASE " + q + " SET PAGE_VERIFY CHECKSUM", nil
}

// AgentJobSteps lists SQL Server Agent's job steps with their commands
// (msdb.dbo.sysjobs, sysjobsteps): readable by sysadmin and by a login
// granted SELECT on them.
const AgentJobSteps = "SELECT j.name, s.step_name, s.command FROM msdb.dbo.sysjobs AS j " +
	"JOIN msdb.dbo.sysjobsteps AS s ON s.job_id = j.job_id"

// AllDatabasesKeywords are the database selections of Ola Hallengren's
// maintenance solution (@Databases) that include every user database,
// restored copies too (https://ola.hallengren.com).
var AllDatabasesKeywords = []string{"USER_DATABASES", "ALL_DATABASES"}

// SelectsAllDatabases reports whether a job step's command selects every
// user database and excludes none of the patterns given (as "-pattern").
func SelectsAllDatabases(command string, patterns []string) (bool, []string) {
	up := strings.ToUpper(command)
	all := false
	for _, k := range AllDatabasesKeywords {
		all = all || strings.Contains(up, k)
	}
	if !all {
		return false, nil
	}
	var missing []string
	for _, p := range patterns {
		if !strings.Contains(up, strings.ToUpper("-"+p)) {
			missing = append(missing, p)
		}
	}
	return len(missing) > 0, missing
}
