package sqlsim

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/backupcycle/backupcycle/internal/sqlsim/tds"
)

// RestoreSpec describes a RESTORE DATABASE run by Instance.RestoreDatabase.
type RestoreSpec struct {
	Database string
	// Stripes are all stripes of the backup set, as SQL Server sees them
	// (`\\bak01\backup\x.bak`, mapped through Config.Shares) or as absolute
	// local paths.
	Stripes []string
	// Move maps logical file names to target paths. Empty: every file goes
	// where the backup set says, i.e. onto the source database's own files,
	// which is what restoring a database over itself needs.
	Move map[string]string
	// Replace is WITH REPLACE: overwrite an existing database (even one of
	// another family) and its files.
	Replace bool
	// RollbackOthers first sets an ONLINE database SINGLE_USER WITH ROLLBACK
	// IMMEDIATE, as a DBA restoring a busy database does; without it, other
	// sessions in the database make the RESTORE fail with 3101.
	RollbackOthers bool
	// Login runs the RESTORE as that login of the instance (it owns the
	// database the RESTORE creates); "" is sa.
	Login string
}

// RestoreDatabase runs RESTORE DATABASE on the instance itself, as a DBA at
// the server would, e.g. to roll a source database back to an older backup
// (user tables such as the product's [DBBackup].[Sequence] travel inside
// the backup, so their rows go back too). It is the same statement a client
// sends — `RESTORE DATABASE [db] FROM DISK = N'...', ... WITH REPLACE` over
// TDS does exactly the same — and is recorded in msdb and Statements like
// any RESTORE. Errors are SQL Server's (tds.Errors inside the returned
// error: 3154 onto another database without Replace, 3101 while another
// session uses the database, 3183/3241 for damaged media, ...).
func (in *Instance) RestoreDatabase(ctx context.Context, spec RestoreSpec) error {
	if spec.Database == "" || len(spec.Stripes) == 0 {
		return errors.New("sqlsim: RestoreDatabase: give the database name and every stripe of the backup set")
	}
	in.mu.Lock()
	running := in.running
	in.mu.Unlock()
	if !running {
		return fmt.Errorf("sqlsim: RestoreDatabase: instance %s is not running; Start it first", in.cfg.Name)
	}
	// Every value is a parameter: nothing of the spec is pasted into text.
	params := []tds.Param{{Name: "@db", Value: spec.Database}}
	var b strings.Builder
	if spec.RollbackOthers {
		b.WriteString("IF DATABASEPROPERTYEX(@db, 'Status') = 'ONLINE' ALTER DATABASE @db SET SINGLE_USER WITH ROLLBACK IMMEDIATE; ")
	}
	b.WriteString("RESTORE DATABASE @db FROM ")
	for i, p := range spec.Stripes {
		if i > 0 {
			b.WriteString(", ")
		}
		name := fmt.Sprintf("@d%d", i+1)
		fmt.Fprintf(&b, "DISK = %s", name)
		params = append(params, tds.Param{Name: name, Value: p})
	}
	b.WriteString(" WITH ")
	logical := make([]string, 0, len(spec.Move))
	for l := range spec.Move {
		logical = append(logical, l)
	}
	sort.Strings(logical)
	for i, l := range logical {
		fmt.Fprintf(&b, "MOVE @l%d TO @t%d, ", i+1, i+1)
		params = append(params, tds.Param{Name: fmt.Sprintf("@l%d", i+1), Value: l}, tds.Param{Name: fmt.Sprintf("@t%d", i+1), Value: spec.Move[l]})
	}
	if spec.Replace {
		b.WriteString("REPLACE, ")
	}
	b.WriteString("RECOVERY")
	user := "sa"
	if spec.Login != "" {
		l := in.principal(spec.Login)
		if l == nil {
			return fmt.Errorf("sqlsim: RestoreDatabase: login %q is not defined on %s", spec.Login, in.cfg.Name)
		}
		user = l.Name
	}
	s := &session{in: in, login: tds.Login{User: user, AppName: "sqlsim RestoreDatabase"}, loginDB: "master", db: "master"}
	err := s.Exec(ctx, tds.Request{SQL: b.String(), Params: params, RPC: true}, discardWriter{})
	switch {
	case err == nil:
		return nil
	case errors.Is(err, tds.ErrKillConnection):
		return fmt.Errorf("sqlsim: restore database %q on %s: the instance crashed", spec.Database, in.cfg.Name)
	}
	// Every message, not only the closing 3013: the first says why.
	var es tds.Errors
	if errors.As(err, &es) && len(es) > 1 {
		msgs := make([]string, len(es))
		for i, e := range es {
			msgs[i] = fmt.Sprintf("%d %s", e.Number, e.Message)
		}
		return fmt.Errorf("sqlsim: restore database %q on %s: %s: %w", spec.Database, in.cfg.Name, strings.Join(msgs[:len(msgs)-1], "; "), err)
	}
	return fmt.Errorf("sqlsim: restore database %q on %s: %w", spec.Database, in.cfg.Name, err)
}

// discardWriter drops the results of statements the instance runs itself.
type discardWriter struct{}

func (discardWriter) Info(int32, uint8, string) error         { return nil }
func (discardWriter) Error(*tds.Error) error                  { return nil }
func (discardWriter) Columns([]tds.Column) error              { return nil }
func (discardWriter) Row(...any) error                        { return nil }
func (discardWriter) StatementDone(uint16, int64, bool) error { return nil }
func (discardWriter) Flush() error                            { return nil }
