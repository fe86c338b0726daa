package preflight

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	mssqldb "github.com/microsoft/go-mssqldb"

	"github.com/backupcycle/backupcycle/internal/config"
	"github.com/backupcycle/backupcycle/internal/plan"
	"github.com/backupcycle/backupcycle/internal/tsql"
)

// querier is what preflight needs of a connection (an *mssql.DB).
type querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// queryRow runs a one-row query into dest; no row is an error.
func queryRow(ctx context.Context, q querier, what, query string, args []any, dest ...any) error {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	defer rows.Close()
	if !rows.Next() {
		if err := rows.Err(); err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		return fmt.Errorf("%s: %w", what, errNoRow)
	}
	if err := rows.Scan(dest...); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return rows.Close()
}

// hasPerms asks every check at once; a NULL answer (unknown securable) is
// "not held".
func hasPerms(ctx context.Context, q querier, checks []tsql.PermCheck) ([]bool, error) {
	query, args, err := tsql.HasPerms(checks...)
	if err != nil {
		return nil, err
	}
	vals := make([]sql.NullInt64, len(checks))
	dest := make([]any, len(vals))
	for i := range vals {
		dest[i] = &vals[i]
	}
	if err := queryRow(ctx, q, "HAS_PERMS_BY_NAME", query, args, dest...); err != nil {
		return nil, err
	}
	out := make([]bool, len(vals))
	for i, v := range vals {
		out[i] = v.Valid && v.Int64 == 1
	}
	return out, nil
}

// readServerFacts asks who the login is, what the server is, and which of
// the server permissions it holds.
func readServerFacts(ctx context.Context, q querier) (serverFacts, error) {
	var (
		login, edition, version    sql.NullString
		sa, dbc, pa, major, engine sql.NullInt64
	)
	if err := queryRow(ctx, q, "login and server properties", tsql.ServerFacts(), nil,
		&login, &sa, &dbc, &pa, &major, &engine, &edition, &version); err != nil {
		return serverFacts{}, err
	}
	f := serverFacts{Login: login.String, Sysadmin: sa.Int64 == 1, DBCreator: dbc.Int64 == 1, ProcessAdmin: pa.Int64 == 1,
		Major: int(major.Int64), EngineEdition: int(engine.Int64), Edition: edition.String, Perms: map[string]bool{}}
	f.Version, _ = plan.ParseVersion(version.String)
	perms := serverPerms(f.Major)
	checks := make([]tsql.PermCheck, len(perms), len(perms)+1)
	for i, p := range perms {
		checks[i] = tsql.PermCheck{Class: tsql.ClassServer, Permission: p}
	}
	checks = append(checks, tsql.PermCheck{Securable: "master", Class: tsql.ClassDatabase, Permission: tsql.PermCreateDatabase})
	held, err := hasPerms(ctx, q, checks)
	if err != nil {
		return f, err
	}
	for i, p := range perms {
		f.Perms[p] = held[i]
	}
	f.MasterCreateDB = held[len(perms)]
	query, err := tsql.ServerRoles(tsql.RoleSecurityAdmin, tsql.RoleServerAdmin)
	if err != nil {
		return f, err
	}
	var secAdmin, srvAdmin sql.NullInt64
	if err := queryRow(ctx, q, "server role membership", query, nil, &secAdmin, &srvAdmin); err != nil {
		return f, err
	}
	f.SecurityAdmin, f.ServerAdmin = secAdmin.Int64 == 1, srvAdmin.Int64 == 1
	return f, nil
}

// readMSDBFacts runs, for each table the restore proof reads, a read that
// returns no row: the very permission check SQL Server makes when the
// cycle reads it (error 229 when SELECT is not held).
func readMSDBFacts(ctx context.Context, q querier) (msdbFacts, error) {
	var f msdbFacts
	for _, t := range []struct {
		table string
		held  *bool
	}{{"restorehistory", &f.RestoreHistory}, {"backupset", &f.BackupSet}} {
		query, err := tsql.ReadProbe("msdb", "dbo", t.table)
		if err != nil {
			return f, err
		}
		rows, err := q.QueryContext(ctx, query)
		if err == nil {
			for rows.Next() {
			}
			err = rows.Err()
			rows.Close()
		}
		switch {
		case err == nil:
			*t.held = true
		case permissionDenied(err):
		default:
			return f, fmt.Errorf("read msdb.dbo.%s: %w", t.table, err)
		}
	}
	return f, nil
}

// permissionDenied reports SQL Server's error 229.
func permissionDenied(err error) bool {
	var se mssqldb.Error
	return errors.As(err, &se) && se.Number == errPermissionDenied
}

// errPermissionDenied is SQL Server's "The %ls permission was denied on the
// object" (Microsoft Learn, "MSSQLSERVER_229").
const errPermissionDenied = 229

// readDatabaseFacts asks about one source database.
func readDatabaseFacts(ctx context.Context, q querier, db *config.Database) (databaseFacts, error) {
	f := databaseFacts{SizeBytes: -1}
	query, args, err := tsql.DatabaseState(db.Name)
	if err != nil {
		return f, err
	}
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return f, fmt.Errorf("state of %s: %w", db.Name, err)
	}
	for rows.Next() {
		var name, state sql.NullString
		var created any
		if err := rows.Scan(&name, &state, &created); err != nil {
			rows.Close()
			return f, fmt.Errorf("state of %s: %w", db.Name, err)
		}
		f.State = strings.ToUpper(state.String)
	}
	if err := rows.Err(); err != nil {
		rows.Close()
		return f, fmt.Errorf("state of %s: %w", db.Name, err)
	}
	rows.Close()
	if f.State != "ONLINE" {
		return f, nil // not there or not usable: nothing else to ask
	}

	seq, err := tsql.SequenceObject(db.Name)
	if err != nil {
		return f, err
	}
	held, err := hasPerms(ctx, q, []tsql.PermCheck{
		{Securable: db.Name, Class: tsql.ClassDatabase, Permission: tsql.PermConnect},
		{Securable: db.Name, Class: tsql.ClassDatabase, Permission: tsql.PermBackupDatabase},
		{Securable: db.Name, Class: tsql.ClassDatabase, Permission: tsql.PermAlter},
		{Securable: seq, Class: tsql.ClassObject, Permission: tsql.PermSelect},
		{Securable: seq, Class: tsql.ClassObject, Permission: tsql.PermUpdate},
		{Securable: db.Name, Class: tsql.ClassDatabase, Permission: tsql.PermControl},
	})
	if err != nil {
		return f, err
	}
	f.Connect, f.Backup, f.Alter, f.SeqSelect, f.SeqUpdate, f.Control = held[0], held[1], held[2], held[3], held[4], held[5]

	query, args, err = tsql.ObjectExists(seq)
	if err != nil {
		return f, err
	}
	var id sql.NullInt64
	if err := queryRow(ctx, q, "sequence table of "+db.Name, query, args, &id); err != nil {
		return f, err
	}
	f.SeqExists = id.Valid

	if f.SizeBytes, err = readSize(ctx, q, db.Name, f.Connect); err != nil {
		return f, err
	}
	query, args, err = tsql.PageVerify(db.Name)
	if err != nil {
		return f, err
	}
	var pv sql.NullString
	if err := queryRow(ctx, q, "PAGE_VERIFY of "+db.Name, query, args, &pv); err != nil {
		return f, err
	}
	f.PageVerify = pv.String
	if db.LogBackups() {
		f.RecoveryModel, f.RecoveryErr = readRecoveryModel(ctx, q, db.Name)
	}
	return f, nil
}

// readRecoveryModel is the database's recovery_model_desc (tsql.RecoveryModel);
// an error says why the login could not read it.
func readRecoveryModel(ctx context.Context, q querier, db string) (string, error) {
	query, args, err := tsql.RecoveryModel(db)
	if err != nil {
		return "", err
	}
	var model, state, last sql.NullString
	if err := queryRow(ctx, q, "recovery model of "+db, query, args, &model, &state, &last); err != nil {
		return "", err
	}
	if !model.Valid || model.String == "" {
		return "", errors.New("sys.databases shows no recovery model of " + db)
	}
	return strings.ToUpper(model.String), nil
}

// readJobSteps reads SQL Server Agent's job steps; readable is false when
// the login may not read them (229).
func readJobSteps(ctx context.Context, q querier) (steps []jobStep, readable bool, err error) {
	rows, err := q.QueryContext(ctx, tsql.AgentJobSteps)
	if err == nil {
		defer rows.Close()
		for rows.Next() {
			var job, step, command sql.NullString
			if err := rows.Scan(&job, &step, &command); err != nil {
				return nil, false, fmt.Errorf("read msdb.dbo.sysjobsteps: %w", err)
			}
			steps = append(steps, jobStep{Job: job.String, Step: step.String, Command: command.String})
		}
		err = rows.Err()
	}
	switch {
	case err == nil:
		return steps, true, nil
	case permissionDenied(err):
		return nil, false, nil
	}
	return nil, false, fmt.Errorf("read msdb.dbo.sysjobsteps: %w", err)
}

// readSize sums a database's files from sys.master_files, or from the
// database's own sys.database_files when the login cannot see the former
// but is a user of the database; -1 when neither shows a file.
func readSize(ctx context.Context, q querier, db string, user bool) (int64, error) {
	query, args, err := tsql.DatabaseFiles(db)
	if err != nil {
		return -1, err
	}
	size, err := sumPages(ctx, q, db, query, args)
	if err != nil || size >= 0 || !user {
		return size, err
	}
	query, err = tsql.DatabaseFilesInDatabase(db)
	if err != nil {
		return -1, err
	}
	if size, err = sumPages(ctx, q, db, query, nil); err != nil {
		return -1, nil // not readable either: unknown, which the report says
	}
	return size, nil
}

func sumPages(ctx context.Context, q querier, db, query string, args []any) (int64, error) {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return -1, fmt.Errorf("files of %s: %w", db, err)
	}
	defer rows.Close()
	var pages int64
	n := 0
	for rows.Next() {
		var typ, size sql.NullInt64
		if err := rows.Scan(&typ, &size); err != nil {
			return -1, fmt.Errorf("files of %s: %w", db, err)
		}
		pages += size.Int64
		n++
	}
	if err := rows.Err(); err != nil {
		return -1, fmt.Errorf("files of %s: %w", db, err)
	}
	if n == 0 {
		return -1, nil
	}
	return pages * tsql.PageBytes, nil
}
