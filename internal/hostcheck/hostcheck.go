// Package hostcheck decides whether a SQL Server instance can do what the
// cycle asks of it, from what the instance says about itself: whether a
// verification instance can host the restored copy of a database (edition
// limits, FILESTREAM, contained databases, QAT-compressed backups, its
// restore directories and their free space), and whether an instance can
// use the paths configured for it (SQL Server on Linux has no UNC paths).
//
// `starter preflight` reports every finding; the cycle checks them before
// its RESTORE and stops at the first problem, naming it and its fix, instead
// of sending a statement SQL Server would refuse (and retrying it).
package hostcheck

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	"github.com/backupcycle/backupcycle/internal/plan"
	"github.com/backupcycle/backupcycle/internal/tsql"
)

// Querier is what the checks need of a connection (an *mssql.DB).
type Querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// Platforms as sys.dm_os_host_info names them.
const (
	Windows = "Windows"
	Linux   = "Linux"
)

// Facts is what an instance says about itself.
type Facts struct {
	Major         int    // ProductMajorVersion: 13 = 2016 ... 16 = 2022
	EngineEdition int    // tsql.EngineEdition*
	Edition       string // "Express Edition (64-bit)", ...
	// Platform is Windows or Linux; "" when it could not be read
	// (PlatformErr says why). SQL Server 2016 runs on Windows only.
	Platform    string
	PlatformErr error
	// Options are the configuration options' values in use
	// (tsql.Configurations), by name.
	Options map[string]int64
	// QAT is the Intel QAT accelerator's mode on SQL Server 2022 (NONE,
	// HARDWARE, SOFTWARE); "" before 2022 or when not read (QATErr).
	QAT    string
	QATErr error
}

// Linux reports SQL Server on Linux.
func (f Facts) Linux() bool { return strings.EqualFold(f.Platform, Linux) }

// Express reports SQL Server Express.
func (f Facts) Express() bool { return f.EngineEdition == tsql.EngineEditionExpress }

// qatLoaded reports an accelerator that can decompress QAT_DEFLATE.
func (f Facts) qatLoaded() bool { return f.QAT == "HARDWARE" || f.QAT == "SOFTWARE" }

// Read asks an instance for its Facts. Only the edition and the options
// are required; the platform and the accelerator are left unknown (with
// the reason) when the login may not read them.
func Read(ctx context.Context, q Querier) (Facts, error) {
	var f Facts
	var major, engine sql.NullInt64
	var edition sql.NullString
	if err := queryRow(ctx, q, "server edition", tsql.HostEdition(), nil, &major, &engine, &edition); err != nil {
		return f, err
	}
	f.Major, f.EngineEdition, f.Edition = int(major.Int64), int(engine.Int64), edition.String
	if f.Major < 14 {
		f.Platform = Windows // SQL Server on Linux starts with 2017
	} else {
		var p sql.NullString
		if err := queryRow(ctx, q, "host platform", tsql.HostPlatform(), nil, &p); err != nil {
			f.PlatformErr = err
		} else {
			f.Platform = p.String
		}
	}
	f.Options = map[string]int64{}
	if err := eachRow(ctx, q, "configuration options", tsql.Configurations(), nil, func(rows *sql.Rows) error {
		var name sql.NullString
		var v sql.NullInt64
		if err := rows.Scan(&name, &v); err != nil {
			return err
		}
		f.Options[strings.ToLower(name.String)] = v.Int64
		return nil
	}); err != nil {
		return f, err
	}
	if f.Major >= 16 {
		f.QAT = "NONE"
		f.QATErr = eachRow(ctx, q, "accelerators", tsql.AcceleratorStatus(), nil, func(rows *sql.Rows) error {
			var acc, mode sql.NullString
			if err := rows.Scan(&acc, &mode); err != nil {
				return err
			}
			if strings.EqualFold(acc.String, "QAT") {
				f.QAT = strings.ToUpper(mode.String)
			}
			return nil
		})
		if f.QATErr != nil {
			f.QAT = ""
		}
	}
	return f, nil
}

// Need is what restoring a database asks of the instance.
type Need struct {
	// Database names it in messages ("sql01/Sales").
	Database string
	// DataBytes and LogBytes are the files' allocated sizes (RESTORE
	// FILELISTONLY Size, sys.master_files size): what RESTORE creates,
	// often far more than the backup holds. DataBytes excludes FILESTREAM.
	DataBytes, LogBytes int64
	Filestream          bool // a FILESTREAM container (FILELISTONLY type S)
	Contained           bool // a partially contained database
	QAT                 bool // compressed with QAT_DEFLATE
}

// Finding is the outcome of one check.
type Finding struct {
	// Check names what was checked: "edition", "FILESTREAM", "restore_data_dir", ...
	Check string
	// Problem: SQL Server would refuse it; Warn: it may work, less well or
	// unproven. Neither: fine.
	Problem, Warn bool
	// Full marks a space problem (it may pass once space is freed).
	Full bool
	// Detail says what was found; Fix what to change.
	Detail, Fix string
}

// Error is a problem as one line: the check, what was found, the fix.
func (f Finding) Error() string {
	return f.Check + ": " + f.Detail + ": " + f.Fix
}

// expressMaxBytes is Express's "Maximum relational database size: 10 GB"
// ("Editions and supported features of SQL Server 2022", Scale limits):
// the data files, not the log nor FILESTREAM data. Beyond it CREATE,
// ALTER and RESTORE fail with 1827.
const expressMaxBytes = 10240 << 20

// Features checks what the database uses against what instance inst
// offers: the edition's size limit, FILESTREAM, containment and the QAT
// accelerator. The edition is always reported, the others when used.
func Features(inst string, f Facts, n Need) []Finding {
	ed := Finding{Check: "edition", Detail: f.Edition}
	if f.Express() {
		ed.Detail = fmt.Sprintf("%s: at most 10 GB of data files per database; %s has %s", f.Edition, n.Database, plan.FormatBytes(n.DataBytes))
		if n.DataBytes > expressMaxBytes {
			ed.Problem = true
			ed.Detail = fmt.Sprintf("%s holds at most 10 GB of data files per database (RESTORE fails with 1827), and %s allocates %s (its files' size, not the backup's)",
				f.Edition, n.Database, plan.FormatBytes(n.DataBytes))
			ed.Fix = fmt.Sprintf("verify %s on a Standard, Enterprise or Developer edition: upgrade %s, or give the backup servers holding its copies another verify_instance", n.Database, inst)
		}
	}
	out := []Finding{ed}
	if n.Filestream {
		c := Finding{Check: "FILESTREAM", Detail: "enabled (filestream access level " + fmt.Sprint(f.Options[tsql.OptionFilestreamAccessLevel]) + ")"}
		switch {
		case f.Linux():
			c.Problem = true
			c.Detail = n.Database + " has FILESTREAM data, which SQL Server on Linux does not support (RESTORE fails with 5591)"
			c.Fix = "verify " + n.Database + " on a Windows instance: give the backup servers holding its copies a verify_instance that runs on Windows"
		case f.Options[tsql.OptionFilestreamAccessLevel] == 0:
			c.Problem = true
			c.Detail = n.Database + " has FILESTREAM data and FILESTREAM is disabled on " + inst + " (RESTORE fails with 5591)"
			c.Fix = "enable FILESTREAM for the service in SQL Server Configuration Manager, then EXEC sp_configure 'filestream access level', 2; RECONFIGURE;"
		}
		out = append(out, c)
	}
	if n.Contained {
		c := Finding{Check: "contained databases", Detail: "contained database authentication is 1"}
		if f.Options[tsql.OptionContainedAuthentication] == 0 {
			c.Problem = true
			c.Detail = n.Database + " is a contained database and contained database authentication is 0 on " + inst + " (RESTORE fails with 12824)"
			c.Fix = "EXEC sp_configure 'contained database authentication', 1; RECONFIGURE;"
		}
		out = append(out, c)
	}
	if n.QAT {
		c := Finding{Check: "QAT", Detail: "the Intel QAT accelerator is loaded (" + f.QAT + ")"}
		if !f.qatLoaded() {
			c.Problem = true
			switch {
			case f.Major < 16:
				c.Detail = n.Database + "'s backups are compressed with QAT_DEFLATE, which SQL Server before 2022 cannot read"
			case f.Linux():
				c.Detail = n.Database + "'s backups are compressed with QAT_DEFLATE, and SQL Server on Linux has no Intel QAT support"
			case f.QATErr != nil:
				c.Detail = n.Database + "'s backups are compressed with QAT_DEFLATE, and whether " + inst + " has the Intel QAT accelerator could not be read (" + f.QATErr.Error() + ")"
			default:
				c.Detail = n.Database + "'s backups are compressed with QAT_DEFLATE, and " + inst + " has no Intel QAT accelerator loaded (" + f.QAT + ")"
			}
			c.Fix = "install the Intel QAT drivers on " + inst + " and enable them (sp_configure 'hardware offload enabled', 1; ALTER SERVER CONFIGURATION SET HARDWARE_OFFLOAD = ON (ACCELERATOR = QAT, MODE = SOFTWARE)), " +
				"or back up with MS_XPRESS: EXEC sp_configure 'backup compression algorithm', 1; RECONFIGURE; on the source"
		}
		out = append(out, c)
	}
	return out
}

// Paths checks the paths instance inst uses to backup server server (key
// names them in the configuration: unc_paths or sql_paths.<inst>) against
// its platform: SQL Server on Linux cannot open UNC paths ("Back up and
// restore SQL Server databases on Linux": a share is mounted on the host).
func Paths(inst string, f Facts, server, key string, paths []string) Finding {
	c := Finding{Check: "paths to " + server, Detail: strings.Join(paths, ", ") + " (" + key + ")"}
	if f.Platform == "" {
		c.Warn = true
		c.Detail = "not checked: the platform could not be read (" + errText(f.PlatformErr) + "); " + c.Detail
		c.Fix = "declare platform: windows or linux for " + inst + " in sql_instances"
		return c
	}
	if !f.Linux() {
		return c
	}
	for _, p := range paths {
		if strings.HasPrefix(p, `\\`) || strings.HasPrefix(p, "//") {
			c.Problem = true
			c.Detail = fmt.Sprintf("%s runs SQL Server on Linux, which cannot open UNC paths like %s (%s of backup server %s)", inst, p, key, server)
			c.Fix = fmt.Sprintf("mount the share on %s's host and give it that directory: sql_paths: {%s: [/mnt/%s]} under backup server %s", inst, inst, server, server)
			return c
		}
	}
	return c
}

func errText(err error) string {
	if err == nil {
		return "unknown"
	}
	return err.Error()
}

// DirState is whether a directory exists on the instance's host.
type DirState struct {
	Exists, Known bool
	Err           error // why it is not known
}

// ReadDir asks the instance whether dir exists, as its service account
// sees it (sys.dm_os_file_exists, SQL Server 2017 and later).
func ReadDir(ctx context.Context, q Querier, f Facts, dir string) DirState {
	if f.Major < 14 {
		return DirState{Err: fmt.Errorf("SQL Server %d cannot be asked (sys.dm_os_file_exists starts with 2017)", f.Major)}
	}
	query, args, err := tsql.FileExists(strings.TrimRight(dir, `\/`))
	if err != nil {
		return DirState{Err: err}
	}
	var file, isDir, parent sql.NullBool
	if err := queryRow(ctx, q, "directory "+dir, query, args, &file, &isDir, &parent); err != nil {
		return DirState{Err: err}
	}
	return DirState{Exists: isDir.Bool, Known: true}
}

// Directory is the check of a restore directory's existence; key names it
// (restore_data_dir, restore_log_dir).
func Directory(inst, key, dir string, st DirState) Finding {
	c := Finding{Check: key, Detail: dir + " exists"}
	switch {
	case !st.Known:
		c.Warn = true
		c.Detail = dir + ": not checked (" + errText(st.Err) + ")"
		c.Fix = "make sure " + dir + " exists on " + inst + "'s host (RESTORE fails with 5133 otherwise)"
	case !st.Exists:
		c.Problem = true
		c.Detail = dir + " does not exist on " + inst + "'s host (RESTORE fails with 5133 and 3156)"
		c.Fix = "create " + dir + " on " + inst + "'s host, writable by its SQL Server service account, or fix " + key
	}
	return c
}

// queryRow runs a one-row query into dest; no row is an error.
func queryRow(ctx context.Context, q Querier, what, query string, args []any, dest ...any) error {
	found := false
	err := eachRow(ctx, q, what, query, args, func(rows *sql.Rows) error {
		if found {
			return nil
		}
		found = true
		return rows.Scan(dest...)
	})
	if err == nil && !found {
		err = fmt.Errorf("%s: no row", what)
	}
	return err
}

// eachRow runs a query and calls fn for every row.
func eachRow(ctx context.Context, q Querier, what, query string, args []any, fn func(*sql.Rows) error) error {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	defer rows.Close()
	for rows.Next() {
		if err := fn(rows); err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return rows.Close()
}
