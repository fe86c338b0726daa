package crashtest

import (
	"context"
	"fmt"
	"math"
	"sort"
	"testing"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/backupcycle/backupcycle/internal/catalog"
	"github.com/backupcycle/backupcycle/internal/status"
	"github.com/backupcycle/backupcycle/workflows"
)

// BenchmarkLogProofLag measures what `log_proof: standby` promises: the
// time from a log backup's finish (SQL Server's backup_finish_date, as the
// chain record keeps it in UTC) to the moment the worker recorded it
// applied on the standby copy, per log, through the embedded Temporal
// server (LogChain takes, copies and hands each log to LogProof). Two
// databases tick once a second for a minute. The reference of the same run
// is the log interval itself: the p99 lag as a share of it says whether
// the proof keeps up with the log backups (below 1) and how much of the
// RPO window orchestration, copy and RESTORE LOG take.
func BenchmarkLogProofLag(b *testing.B) {
	for i := 0; i < b.N; i++ {
		benchLogProofLag(b, time.Minute)
	}
}

func benchLogProofLag(b *testing.B, run time.Duration) {
	srv := sharedTemporal(b)
	c := dial(b, srv)
	s := newFleetSite(b, 1, "")
	s.cfg.Defaults.OwnsBackupChain, s.cfg.Defaults.CopyOnly = true, false
	s.cfg.Defaults.LogBackup.Every = time.Minute
	s.cfg.Defaults.LogProof = "standby"
	s.cfg.Defaults.StandbyName = "{instance}_{db}_standby" // DBA on both instances
	stop, dbs := runLogFleet(b, c, s)
	defer stop()
	if len(dbs) == 0 {
		b.Fatal("no cycle verified")
	}
	var ids []string
	for _, d := range dbs {
		id := workflows.LogChainWorkflowID(d.instance, d.database)
		if _, err := c.ExecuteWorkflow(context.Background(), client.StartWorkflowOptions{ID: id, TaskQueue: s.tq},
			workflows.LogChainName, workflows.LogChainInput{Database: d.database, Instance: d.instance}); err != nil {
			b.Fatal(err)
		}
		ids = append(ids, id)
	}
	time.Sleep(run)
	for _, id := range ids {
		_ = c.CancelWorkflow(context.Background(), id, "")
	}
	time.Sleep(2 * time.Second)

	// Every log's record, from every backup server (the chain's server
	// has the newest logs, the copy target the newest proofs: merged).
	ctx := context.Background()
	var lags, takes []time.Duration
	unproven := 0
	for _, d := range dbs {
		byNumber := map[string]catalog.LogBackup{}
		for j := range s.cfg.BackupServers {
			st, err := status.Open(ctx, &s.cfg.BackupServers[j])
			if err != nil {
				b.Fatal(err)
			}
			l, err := catalog.ListChains(ctx, catalog.StorageFS{Storage: st}, nil, catalog.Of(d.instance, d.database))
			st.Close()
			if err != nil {
				b.Fatal(err)
			}
			for _, r := range l.Records {
				for _, lb := range r.Logs {
					k := fmt.Sprintf("%d/%d", r.Chain, lb.Number)
					if cur, ok := byNumber[k]; !ok || cur.Proven == nil {
						byNumber[k] = lb
					}
				}
			}
		}
		for _, lb := range byNumber {
			if lb.BackupFinishUTC.IsZero() || lb.Foreign != nil {
				continue
			}
			takes = append(takes, lb.BackupFinishUTC.Sub(lb.BackupStartUTC))
			if lb.Proven == nil {
				unproven++
				continue
			}
			lags = append(lags, lb.Proven.At.Sub(lb.BackupFinishUTC))
		}
	}
	if len(lags) == 0 {
		b.Fatalf("no log proven on the standby in %s (%d taken)", run, len(takes))
	}
	sort.Slice(lags, func(i, j int) bool { return lags[i] < lags[j] })
	p := func(q float64) time.Duration { return lags[min(len(lags)-1, int(math.Ceil(q*float64(len(lags))))-1)] }
	b.ReportMetric(float64(len(lags)), "logs-proven")
	b.ReportMetric(float64(unproven), "logs-unproven")
	b.ReportMetric(p(0.5).Seconds(), "lag-p50-s")
	b.ReportMetric(p(0.99).Seconds(), "lag-p99-s")
	b.ReportMetric(lags[len(lags)-1].Seconds(), "lag-max-s")
	b.ReportMetric(p(0.99).Seconds()/logBenchTick.Seconds(), "p99/interval")
	b.Logf("%d databases, %s at one log backup a second: %d logs proven, %d not yet; lag p50 %s, p99 %s, max %s; BACKUP LOG itself: median %s",
		len(dbs), run, len(lags), unproven, p(0.5).Round(time.Millisecond), p(0.99).Round(time.Millisecond),
		lags[len(lags)-1].Round(time.Millisecond), median(takes).Round(time.Millisecond))
}
