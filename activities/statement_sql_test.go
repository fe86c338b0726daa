package activities

import (
	"context"
	"errors"
	"testing"

	"go.uber.org/zap"

	"github.com/backupcycle/backupcycle/internal/mssql"
	"github.com/backupcycle/backupcycle/internal/sitetest"
	"github.com/backupcycle/backupcycle/internal/tsql"
)

// An attempt whose context has ended never sends its statement: its
// heartbeat learned that the attempt timed out (a frozen worker thawed
// after its retry had started), and the retry's RESTORE or CHECKDB may be
// running; a stale RESTORE ... REPLACE sent now would replace the copy the
// retry is about to check, failing a sound set on RestoreMismatch.
func TestStatementOfAnEndedAttemptIsNotSent(t *testing.T) {
	site := sitetest.New(t, sitetest.Options{Database: "Sales"})
	sqlDB, err := mssql.Open(context.Background(), mssql.Target{Instance: "verify01", Address: site.Verify.Addr(), User: "sa",
		Password: sitetest.Password, Database: "master", Encrypt: "disable"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sqlDB.Close() })
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	text := `RESTORE DATABASE [Sales_verify] FROM DISK = N'\\bak01-nic1\backup\none.bak' WITH REPLACE`
	ls := &longStatement{db: sqlDB, op: "RESTORE DATABASE", command: tsql.CommandRestoreDatabase, text: text,
		marker: mssql.Marker{Prefix: "RESTORE DATABASE [Sales_verify]"}, log: zap.NewNop()}
	if _, err := ls.start(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("start of an ended attempt: %v, want context.Canceled", err)
	}
	for _, s := range site.Verify.Statements() {
		if s.Kind == "RESTORE DATABASE" {
			t.Fatalf("an ended attempt sent %q (outcome %s)", s.SQL, s.Outcome)
		}
	}
}
