package cycle

import (
	"strings"
	"sync"
	"testing"

	"github.com/backupcycle/backupcycle/activities"
	"github.com/backupcycle/backupcycle/internal/metrics"
)

// damageRecorder keeps what Backup tells the metrics about a damaged
// source.
type damageRecorder struct {
	metrics.Nop
	mu      sync.Mutex
	damaged []string
}

func (r *damageRecorder) SourceDamaged(instance, database string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.damaged = append(r.damaged, instance+"/"+database)
}

// A BACKUP that meets damage in the source database (a page failing its
// checksum, 3043; a data file the disk returns damaged, 3203 with OS error
// 23) is SourceDatabaseDamaged: not retryable, no evidence of a corrupt set
// or a failed CHECKDB, an alarm naming the file and the fix.
func TestSQLBackupMeetsADamagedSource(t *testing.T) {
	for _, tc := range []struct {
		name   string
		damage func(t *testing.T, f *sqlFixture)
	}{
		{"page checksum", func(t *testing.T, f *sqlFixture) {
			if err := f.src.CorruptPage("Sales", 1, 25); err != nil {
				t.Fatal(err)
			}
		}},
		{"CRC reading a data file", func(t *testing.T, f *sqlFixture) {
			if err := f.src.SetDataFileReadError("Sales", 1, 23); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newSQLFixture(t, "Sales", "")
			rec := &damageRecorder{}
			f.acts.Metrics = rec
			tc.damage(t, f)
			var p activities.Plan
			f.must(f.acts.PlanCycle, activities.PlanInput{Database: "Sales"}, &p)
			var seq int64
			f.must(f.acts.AllocateSequence, activities.SequenceInput{Database: "Sales"}, &seq)
			err := f.run(f.acts.Backup, activities.BackupInput{Database: "Sales", Sequence: seq, Server: p.Rotation[0], Stripes: p.Stripes}, nil)
			typ := activities.ErrorType(err)
			if typ != activities.ErrSourceDatabaseDamaged || activities.Evidence(typ) != "" || !appErrorOf(t, err).NonRetryable() {
				t.Fatalf("backup of a damaged source: %v (%s), want non-retryable %s without evidence", err, typ, activities.ErrSourceDatabaseDamaged)
			}
			if msg := err.Error(); !strings.Contains(msg, "Sales") || !strings.Contains(msg, "DBCC CHECKDB") || !strings.Contains(msg, ".mdf") {
				t.Errorf("message %q, want the database, the file and the fix (DBCC CHECKDB on the source)", msg)
			}
			if len(rec.damaged) != 1 || rec.damaged[0] != "sql01/Sales" {
				t.Errorf("alarm metric: %v, want one for sql01/Sales", rec.damaged)
			}
		})
	}
}

// A source whose pages carry no checksum (PAGE_VERIFY TORN_PAGE_DETECTION
// or NONE, common after upgrades) gets a plan warning with the fix: BACKUP
// WITH CHECKSUM cannot verify its pages.
func TestSQLPlanWarnsOfPageVerify(t *testing.T) {
	f := newSQLFixture(t, "Sales", "")
	for _, w := range f.plan().Warnings {
		if strings.Contains(w, "PAGE_VERIFY") {
			t.Errorf("plan of a CHECKSUM database warns: %s", w)
		}
	}
	execOn(t, f.src, "ALTER DATABASE [Sales] SET PAGE_VERIFY TORN_PAGE_DETECTION")
	p := f.plan()
	found := false
	for _, w := range p.Warnings {
		found = found || strings.Contains(w, "TORN_PAGE_DETECTION") && strings.Contains(w, "ALTER DATABASE [Sales] SET PAGE_VERIFY CHECKSUM")
	}
	if !found {
		t.Errorf("plan warnings %q, want PAGE_VERIFY TORN_PAGE_DETECTION with the fix", p.Warnings)
	}
}
