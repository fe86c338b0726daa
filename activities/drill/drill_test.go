package drill

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/temporal"

	"github.com/backupcycle/backupcycle/activities"
	"github.com/backupcycle/backupcycle/internal/catalog"
	"github.com/backupcycle/backupcycle/internal/config"
	"github.com/backupcycle/backupcycle/internal/evidence"
	"github.com/backupcycle/backupcycle/internal/recovery"
)

var t0 = time.Date(2026, 10, 25, 0, 0, 0, 0, time.UTC)

func at(min int) time.Time { return t0.Add(time.Duration(min) * time.Minute) }

// dstEnd is a verified full at minute 0 and a proven log every 15 minutes
// after it, on a source whose clock went back an hour (the end of daylight
// saving time, UTC+2 to UTC+1) before log 4: the commits of logs 1-3 read
// up to 02:45 on the clock, so STOPAT names no point before minute 120
// (02:00 again on the new clock), and log 4 holds commits on both clocks.
func dstEnd() recovery.Catalog {
	m := catalog.New("sql01", "Sales", 1, t0)
	m.State, m.Servers, m.PrimaryServer = catalog.StateVerified, []string{"bak01"}, "bak01"
	m.Stripes = []catalog.Stripe{{Name: m.StripeFileName(1, 1), Size: 1000, SHA256: strings.Repeat("a", 64)}}
	m.Header = &catalog.Header{BackupSetGUID: "00000001-0000-0000-0000-000000000000", FirstLSN: "10000000000", LastLSN: "20000000000",
		BackupStart: at(-5).Add(2 * time.Hour), BackupFinish: at(0).Add(2 * time.Hour)}
	m.Header.SetUTCOffset(120)
	r := catalog.NewChainRecord("sql01", "Sales", 1, 1, t0)
	r.Fulls = []catalog.ChainFull{{Sequence: 1, BackupSetGUID: m.Header.BackupSetGUID, FirstLSN: m.Header.FirstLSN, LastLSN: m.Header.LastLSN,
		CheckpointLSN: m.Header.FirstLSN, FinishUTC: at(0)}}
	for n := int64(1); n <= 10; n++ {
		offset := 120
		if n >= 4 {
			offset = 60
		}
		start := at(15 * int(n))
		l := catalog.LogBackup{Number: n, State: catalog.LogCopied, WorkflowID: "w", RunID: "r", BackupSetGUID: fmt.Sprintf("guid-log-%d", n),
			FirstLSN: fmt.Sprintf("%d000000000", 5+10*n), LastLSN: fmt.Sprintf("%d000000000", 15+10*n),
			BackupStart: start.Add(time.Duration(offset) * time.Minute), BackupFinish: start.Add(time.Duration(offset+1) * time.Minute),
			Servers: []string{"bak01"}, Files: []catalog.Stripe{{Name: fmt.Sprintf("log%d.trn", n), Size: 100, SHA256: strings.Repeat("b", 64)}},
			UpdatedAt: t0, Proven: &catalog.LogProof{At: start.Add(time.Minute), Mode: "standby", Instance: "verify01", Database: "Sales_standby"}}
		l.SetUTCOffset(offset)
		r.Logs = append(r.Logs, l)
	}
	return recovery.Build([]recovery.Server{{Name: "bak01", Manifests: []*catalog.Manifest{m}, Chains: []*catalog.ChainRecord{r}}})
}

// A drill's random point is one the recovery plan accepts: never one the
// source's clock going back leaves unnamed by STOPAT (the planner refuses
// those with RecoveryPointUnreachable); when no point of the last
// drill.within is acceptable, the drill says so before anything is
// restored.
func TestPickPointChoosesOnlyPointsThePlanAccepts(t *testing.T) {
	cat := dstEnd()
	// The proven window is minutes 0-150 (log 10's start); its last hour,
	// 90-150, holds refused points (up to 120) and accepted ones.
	for i := range 200 {
		p, err := pickPoint(cat, time.Hour, at(200))
		if err != nil {
			t.Fatalf("pick %d: %v", i, err)
		}
		if p.Before(at(90)) || p.After(at(150)) {
			t.Fatalf("pick %d: %s, outside the last hour of the proven window", i, p)
		}
		if _, err := recovery.Choose(cat, recovery.Point{At: p}); err != nil {
			t.Fatalf("pick %d: %s (minute %.1f), which the plan refuses: %v", i, p, p.Sub(t0).Minutes(), err)
		}
	}
	// The last 20 minutes of a window that ends at log 7's start (minute
	// 105): every point is refused.
	cut := dstEnd()
	for i := range cut.Chains[0].Logs {
		if cut.Chains[0].Logs[i].Number >= 7 {
			cut.Chains[0].Logs[i].Proven = nil
		}
	}
	_, err := pickPoint(cut, 20*time.Minute, at(200))
	var app *temporal.ApplicationError
	if !errors.As(err, &app) || app.Type() != activities.ErrRecoveryPointUnreachable || !app.NonRetryable() {
		t.Fatalf("no acceptable point: %v, want a non-retryable %s", err, activities.ErrRecoveryPointUnreachable)
	}
	for _, w := range []string{"drill.within", "clock went back", "point: latest"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not say %q", err, w)
		}
	}
}

// A drill from the immutable copy is recorded in the evidence ledger with
// the store, location and set it restored from; another drill names none.
func TestDrillEvidenceNamesTheImmutableSource(t *testing.T) {
	db := &config.Database{Instance: "sql01", Name: "Sales"}
	res := catalog.DrillResult{Outcome: catalog.DrillPassed, Instance: "sqlverify", Database: "Sales_drill", Point: "latest", Sequence: 3,
		RecoveryPoint: t0}
	if r := drillEvidence(context.Background(), "bak01", db, res); r.Drill.Immutable != nil {
		t.Errorf("a drill from the backup servers names an immutable source: %+v", r.Drill.Immutable)
	}
	res.Immutable = &catalog.DrillImmutable{Store: "vault01", Location: "s3://backups/site", Sequence: 3, Staging: "bak02"}
	r := drillEvidence(context.Background(), "bak01", db, res)
	want := evidence.ImmutableSource{Store: "vault01", Location: "s3://backups/site", Sequence: 3}
	if r.Drill.Immutable == nil || *r.Drill.Immutable != want || r.Set == nil || r.Set.Sequence != 3 {
		t.Errorf("drill record: %+v, set %+v; want immutable %+v", r.Drill.Immutable, r.Set, want)
	}
}
