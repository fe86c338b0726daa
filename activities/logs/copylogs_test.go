package logs

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/temporal"

	"github.com/backupcycle/backupcycle/activities"
	"github.com/backupcycle/backupcycle/internal/catalog"
	"github.com/backupcycle/backupcycle/internal/sitetest"
	"github.com/backupcycle/backupcycle/internal/storage/local"
)

// logSite is a site of two local backup servers (no SQL) whose database
// has log backups, and the log chain's activities over it.
func logSite(t *testing.T) (*sitetest.Site, *Activities) {
	t.Helper()
	site := sitetest.New(t, sitetest.Options{Database: "Sales", NoSQL: true, ManifestKeys: []string{"k1"},
		Extra: "    owns_backup_chain: true\n    log_backup: {every: 1m}\n"})
	base := activities.New(nil)
	base.Cycle = activities.CycleDeps{Config: site.Config, Poll: 20 * time.Millisecond}
	return site, New(base)
}

// writtenChain writes chain 1 of sql01/Sales on bak01: a base full, logs 1
// and 2 written (files of their own content), log 3 pending.
func writtenChain(t *testing.T, site *sitetest.Site, a *Activities) *catalog.ChainRecord {
	t.Helper()
	now := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	r := catalog.NewChainRecord(site.Instance, site.Database, 1, 1, now)
	r.Fulls = []catalog.ChainFull{{Sequence: 7, BackupSetGUID: "6f9619ff-8b86-d011-b42d-00c04fc964ff", FirstLSN: "1000", LastLSN: "2000",
		CheckpointLSN: "1500", FinishUTC: now}}
	for n := int64(1); n <= 3; n++ {
		if _, err := r.Claim(n, "logchain/sql01/Sales", "run1", now); err != nil {
			t.Fatal(err)
		}
		if n == 3 {
			break
		}
		l := r.Log(n)
		name := r.LogFileName(n, 1, 1)
		data := []byte("log backup " + name)
		if err := os.WriteFile(filepath.Join(site.Dirs["bak01"], name), data, 0o644); err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(data)
		l.State, l.FirstLSN, l.LastLSN = catalog.LogWritten, []string{"", "1900", "2100"}[n], []string{"", "2100", "2300"}[n]
		l.BackupStart, l.BackupFinish = now.Add(time.Duration(n)*time.Minute), now.Add(time.Duration(n)*time.Minute+time.Second)
		l.SetUTCOffset(60)
		l.Files = []catalog.Stripe{{Name: name, Size: int64(len(data)), SHA256: hex.EncodeToString(sum[:])}}
		l.Servers = []string{"bak01"}
	}
	keys, err := site.Config.ManifestKeyRing()
	if err != nil {
		t.Fatal(err)
	}
	st, err := local.Open(context.Background(), site.Dirs["bak01"])
	if err != nil {
		t.Fatal(err)
	}
	if err := catalog.SaveChain(context.Background(), catalog.StorageFS{Storage: st}, keys, r); err != nil {
		t.Fatal(err)
	}
	return r
}

func loadRecord(t *testing.T, site *sitetest.Site, server string) *catalog.ChainRecord {
	t.Helper()
	keys, _ := site.Config.ManifestKeyRing()
	st, err := local.Open(context.Background(), site.Dirs[server])
	if err != nil {
		t.Fatal(err)
	}
	r, err := catalog.LoadChain(context.Background(), catalog.StorageFS{Storage: st}, keys, site.Instance, site.Database, 1, 1)
	if err != nil {
		t.Fatal(err)
	}
	if !r.Trusted() {
		t.Fatalf("record on %s not trusted: %s", server, r.Auth.Why())
	}
	return r
}

func TestCopyLogsCopiesWrittenLogsCheckedAndRecordsThemOnBothServers(t *testing.T) {
	site, a := logSite(t)
	rec := writtenChain(t, site, a)
	out, err := a.CopyLogs(context.Background(), CopyLogsInput{Database: "Sales", Instance: site.Instance, Chain: 1})
	if err != nil {
		t.Fatal(err)
	}
	if out.From != "bak01" || out.To != "bak02" || len(out.Copied) != 2 || out.Through != 2 {
		t.Fatalf("CopyLogs: %+v, want logs 1 and 2 copied from bak01 to bak02", out)
	}
	for n := int64(1); n <= 2; n++ {
		name := rec.LogFileName(n, 1, 1)
		want, _ := os.ReadFile(filepath.Join(site.Dirs["bak01"], name))
		got, err := os.ReadFile(filepath.Join(site.Dirs["bak02"], name))
		if err != nil || string(got) != string(want) {
			t.Fatalf("log %d on bak02: %q (%v), want %q", n, got, err, want)
		}
	}
	for _, srv := range []string{"bak01", "bak02"} {
		r := loadRecord(t, site, srv)
		for n := int64(1); n <= 2; n++ {
			if l := r.Log(n); l.State != catalog.LogCopied || len(l.Servers) != 2 || l.Servers[1] != "bak02" {
				t.Fatalf("record on %s, log %d: state %s servers %v, want copied on bak01 and bak02", srv, n, l.State, l.Servers)
			}
		}
		if l := r.Log(3); l.State != catalog.LogPending {
			t.Fatalf("record on %s: pending log 3 is %s", srv, l.State)
		}
	}
	// Again: nothing left to copy, the same through.
	again, err := a.CopyLogs(context.Background(), CopyLogsInput{Database: "Sales", Instance: site.Instance, Chain: 1})
	if err != nil || len(again.Copied) != 0 || again.Through != 2 {
		t.Fatalf("second CopyLogs: %+v, %v: want nothing copied, through 2", again, err)
	}
}

// A log file whose bytes are not those its record hashed is not copied:
// the copy target never holds a log the chain did not write.
func TestCopyLogsRefusesAFileThatIsNotTheRecordedOne(t *testing.T) {
	site, a := logSite(t)
	rec := writtenChain(t, site, a)
	name := rec.LogFileName(2, 1, 1)
	if err := os.WriteFile(filepath.Join(site.Dirs["bak01"], name), []byte("log backup "+name[:len(name)-1]+"X"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := a.CopyLogs(context.Background(), CopyLogsInput{Database: "Sales", Instance: site.Instance, Chain: 1})
	var appErr *temporal.ApplicationError
	if !errors.As(err, &appErr) || appErr.NonRetryable() == false {
		t.Fatalf("error %v: want a non-retryable error", err)
	}
	if _, err := os.Stat(filepath.Join(site.Dirs["bak02"], name)); err == nil {
		t.Fatalf("%s is on bak02 although its bytes are not the recorded ones", name)
	}
	if l := loadRecord(t, site, "bak01").Log(2); l.State != catalog.LogWritten {
		t.Fatalf("log 2 is %s on bak01, want still written", l.State)
	}
}

func TestLogPlanReadsTheConfiguration(t *testing.T) {
	site, a := logSite(t)
	p, err := a.LogPlan(context.Background(), LogPlanInput{Database: "Sales", Instance: site.Instance})
	if err != nil {
		t.Fatal(err)
	}
	if !p.Enabled || p.Every != time.Minute || p.ProofMode != "nightly" || p.Server != "bak01" || p.CopyTo != "bak02" {
		t.Fatalf("plan %+v", p)
	}
	_, err = a.LogPlan(context.Background(), LogPlanInput{Database: "Nope", Instance: site.Instance})
	var appErr *temporal.ApplicationError
	if !errors.As(err, &appErr) || appErr.Type() != activities.ErrInvalidConfig {
		t.Fatalf("unconfigured database: %v, want InvalidConfig", err)
	}
}

// A copied log whose file went missing on one server (deleted by hand, a
// restore of the share) is copied again from the other, hash-checked; one
// missing on both is an error naming it, not a chain the record calls
// whole.
func TestCopyLogsCopiesAgainALogFileMissingOnOneServer(t *testing.T) {
	site, a := logSite(t)
	rec := writtenChain(t, site, a)
	in := CopyLogsInput{Database: "Sales", Instance: site.Instance, Chain: 1}
	if _, err := a.CopyLogs(context.Background(), in); err != nil {
		t.Fatal(err)
	}
	one, two := rec.LogFileName(1, 1, 1), rec.LogFileName(2, 1, 1)
	want := map[string][]byte{}
	for _, name := range []string{one, two} {
		want[name], _ = os.ReadFile(filepath.Join(site.Dirs["bak01"], name))
	}
	if err := os.Remove(filepath.Join(site.Dirs["bak02"], one)); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(site.Dirs["bak01"], two)); err != nil {
		t.Fatal(err)
	}
	out, err := a.CopyLogs(context.Background(), in)
	if err != nil {
		t.Fatalf("CopyLogs with a file missing on each server: %v", err)
	}
	if out.Through != 2 {
		t.Fatalf("CopyLogs: %+v, want through 2", out)
	}
	for srv, name := range map[string]string{"bak02": one, "bak01": two} {
		got, err := os.ReadFile(filepath.Join(site.Dirs[srv], name))
		if err != nil || string(got) != string(want[name]) {
			t.Fatalf("%s on %s: %q (%v), want it copied again: %q", name, srv, got, err, want[name])
		}
	}

	for _, srv := range []string{"bak01", "bak02"} {
		if err := os.Remove(filepath.Join(site.Dirs[srv], one)); err != nil {
			t.Fatal(err)
		}
	}
	_, err = a.CopyLogs(context.Background(), in)
	var appErr *temporal.ApplicationError
	if !errors.As(err, &appErr) || !appErr.NonRetryable() || !strings.Contains(err.Error(), one) {
		t.Fatalf("CopyLogs with log 1 gone from both servers: %v, want a non-retryable error naming %s", err, one)
	}
}
