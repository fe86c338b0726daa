package recovery

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/backupcycle/backupcycle/internal/catalog"
)

// The estate of these tests: database Sales of sql01, backed up to bak01
// and copied to bak02. Times are minutes after t0; LSNs are hundreds.
var t0 = time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)

func at(min int) time.Time { return t0.Add(time.Duration(min) * time.Minute) }

func lsn(n int) string { return fmt.Sprintf("%d000000000", n) }

// set is a manifest of set seq in state, finished at minute fin, its LSNs
// [first, last), on servers.
func set(seq int64, state catalog.State, fin, first, last int, servers ...string) *catalog.Manifest {
	m := catalog.New("sql01", "Sales", seq, t0)
	m.State, m.Servers, m.PrimaryServer = state, servers, "bak01"
	m.Stripes = []catalog.Stripe{{Name: m.StripeFileName(1, 1), Size: 1000, SHA256: strings.Repeat("a", 64)}}
	m.Header = &catalog.Header{BackupSetGUID: fmt.Sprintf("0000000%d-0000-0000-0000-000000000000", seq), FirstLSN: lsn(first), LastLSN: lsn(last),
		BackupStart: at(fin - 5), BackupFinish: at(fin + 60)}
	m.Header.SetUTCOffset(60) // the source runs at UTC+1
	return m
}

// log is log n of a chain, [first, last) started at minute start, on
// servers, proven or not.
func log(n int64, first, last, start int, proven bool, servers ...string) catalog.LogBackup {
	l := catalog.LogBackup{Number: n, State: catalog.LogCopied, WorkflowID: "w", RunID: "r", BackupSetGUID: fmt.Sprintf("guid-log-%d", n),
		FirstLSN: lsn(first), LastLSN: lsn(last), BackupStart: at(start + 60), BackupFinish: at(start + 61), Servers: servers,
		Files: []catalog.Stripe{{Name: fmt.Sprintf("log%d.trn", n), Size: 100, SHA256: strings.Repeat("b", 64)}}, UpdatedAt: t0}
	l.SetUTCOffset(60)
	if proven {
		l.Proven = &catalog.LogProof{At: at(start + 2), Mode: "standby", Instance: "verify01", Database: "Sales_standby"}
	}
	return l
}

// record is part 1 of chain id, started on full m.
func record(id int64, m *catalog.Manifest, logs ...catalog.LogBackup) *catalog.ChainRecord {
	r := catalog.NewChainRecord("sql01", "Sales", id, 1, t0)
	h := m.Header
	r.Fulls = []catalog.ChainFull{{Sequence: m.Sequence, BackupSetGUID: h.BackupSetGUID, FirstLSN: h.FirstLSN, LastLSN: h.LastLSN,
		CheckpointLSN: h.FirstLSN, FinishUTC: h.BackupFinishUTC}}
	r.Logs = logs
	return r
}

// estate: set 1 (minute 0, LSN 10..20) and set 2 (minute 60, LSN 40..50),
// both verified and on both servers; chain 1 from set 1 with a log every
// 15 minutes from minute 15, log n holding [5+10n, 15+10n), 1-4 proven.
func estate() []Server {
	s1 := set(1, catalog.StateVerified, 0, 10, 20, "bak01", "bak02")
	s2 := set(2, catalog.StateVerified, 60, 40, 50, "bak01", "bak02")
	var logs []catalog.LogBackup
	for i := range 8 {
		logs = append(logs, log(int64(i+1), 15+10*i, 25+10*i, 15*(i+1), i < 4, "bak01", "bak02"))
	}
	r := record(1, s1, logs...)
	return []Server{
		{Name: "bak01", Manifests: []*catalog.Manifest{s1, s2}, Chains: []*catalog.ChainRecord{r}},
		{Name: "bak02", Manifests: []*catalog.Manifest{s1, s2}, Chains: []*catalog.ChainRecord{r}},
	}
}

func numbers(p Plan) []int64 {
	var out []int64
	for _, s := range p.Logs() {
		out = append(out, s.Number)
	}
	return out
}

func unreachable(t *testing.T, err error, words ...string) {
	t.Helper()
	var u *Unreachable
	if !errors.As(err, &u) {
		t.Fatalf("error %v, want Unreachable", err)
	}
	for _, w := range words {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not say %q", err, w)
		}
	}
}

// A point between two logs: the newest verified full that finished by it
// (set 2 at minute 60, not set 1), the log that rolls it forward (log 4
// holds LSN 50), and the logs up to the first that started at or after
// the point; STOPAT is the point, on the clock of the log that reaches it.
func TestChooseAPointTakesTheNewestFullBeforeItAndTheLogsUpToIt(t *testing.T) {
	c := Build(estate())
	p, err := Choose(c, Point{At: at(80)})
	if err != nil {
		t.Fatal(err)
	}
	if f := p.Full(); f.Kind != KindFull || f.Sequence != 2 || len(f.Servers) != 2 || f.Servers[0] != "bak01" || f.Files[0].SHA256 == "" {
		t.Fatalf("full %+v, want set 2 on bak01 and bak02", f)
	}
	// Log 4 started at 60 and holds LSN 50; log 5 started at 75 < 80;
	// log 6 started at 90 >= 80: it holds every commit up to 80.
	if got := numbers(p); fmt.Sprint(got) != "[4 5 6]" {
		t.Fatalf("logs %v, want [4 5 6]", got)
	}
	if !p.StopAt.Equal(at(80)) || p.StopAtOffsetMinutes != 60 || !p.RecoveryPoint.Equal(at(80)) || p.RecoveryPointFrom != "stopat" {
		t.Fatalf("stop at %s (offset %d), recovery point %s (%s)", p.StopAt, p.StopAtOffsetMinutes, p.RecoveryPoint, p.RecoveryPointFrom)
	}
	if len(p.Warnings) != 1 || !strings.Contains(p.Warnings[0], "5, 6 of chain 1 are not proven") {
		t.Fatalf("warnings %q, want logs 5 and 6 named unproven", p.Warnings)
	}
	// Before set 2 finished: set 1 and the logs from log 1.
	p, err = Choose(c, Point{At: at(40)})
	if err != nil || p.Full().Sequence != 1 || fmt.Sprint(numbers(p)) != "[1 2 3]" {
		t.Fatalf("at minute 40: set %d logs %v, %v; want set 1 and logs 1-3", p.Full().Sequence, numbers(p), err)
	}
}

// The latest: the newest verified full and every log after it. The
// recovery point is the last log's start: a log backup holds the log up to
// a point it reaches after it starts and before it finishes, so only what
// committed before its start is in it for certain; its finish bounds what
// may be (nothing committed later is).
func TestChooseTheLatestRestoresEveryLogToTheEnd(t *testing.T) {
	p, err := Choose(Build(estate()), Point{Latest: true})
	if err != nil {
		t.Fatal(err)
	}
	if p.Full().Sequence != 2 || fmt.Sprint(numbers(p)) != "[4 5 6 7 8]" || !p.StopAt.IsZero() {
		t.Fatalf("set %d logs %v stop at %s, want set 2, logs 4-8, no STOPAT", p.Full().Sequence, numbers(p), p.StopAt)
	}
	if !p.RecoveryPoint.Equal(at(120)) || p.RecoveryPointFrom != "last log's start" || !p.RecoveryPointBound.Equal(at(121)) {
		t.Fatalf("recovery point %s (%s), bound %s; want log 8's start %s, bounded by its finish %s",
			p.RecoveryPoint, p.RecoveryPointFrom, p.RecoveryPointBound, at(120), at(121))
	}
	// To an instant, the point is the instant and bounds itself.
	p, err = Choose(Build(estate()), Point{At: at(80)})
	if err != nil || !p.RecoveryPoint.Equal(at(80)) || !p.RecoveryPointBound.Equal(at(80)) {
		t.Fatalf("at minute 80: recovery point %s bound %s, %v", p.RecoveryPoint, p.RecoveryPointBound, err)
	}
}

// The latest with no log after the newest verified full: the full's start
// is what it holds for certain, its finish the bound.
func TestChooseTheLatestWithoutLogsIsTheFullsStart(t *testing.T) {
	servers := estate()
	for i := range servers {
		servers[i].Chains = nil
	}
	p, err := Choose(Build(servers), Point{Latest: true})
	if err != nil {
		t.Fatal(err)
	}
	f := p.Full()
	if len(p.Logs()) != 0 || f.Start.IsZero() || !p.RecoveryPoint.Equal(f.Start) || p.RecoveryPointFrom != "full's start" ||
		!p.RecoveryPointBound.Equal(f.Finish) {
		t.Fatalf("logs %v recovery point %s (%s) bound %s; want set %d's start %s bounded by its finish %s",
			numbers(p), p.RecoveryPoint, p.RecoveryPointFrom, p.RecoveryPointBound, f.Sequence, f.Start, f.Finish)
	}
}

// A point before the oldest full, and a point after the newest log held:
// no restore reaches them, and the error says how far the backups go.
func TestChooseRefusesPointsOutsideTheBackups(t *testing.T) {
	c := Build(estate())
	_, err := Choose(c, Point{At: at(-30)})
	unreachable(t, err, "before the oldest verified full backup held (set 1")
	// Log 8, the newest, started at 120: a point after that is not covered.
	_, err = Choose(c, Point{At: at(125)})
	unreachable(t, err, "reach 2026-03-01T12:00:00Z at the latest", "log 8 of chain 1", "--latest")
	if _, err := Choose(c, Point{}); err == nil {
		t.Fatal("Choose without a point: no error")
	}
}

// A point after the newest proven log but before the newest log: the
// unproven logs are used, and named.
func TestChooseUsesLogsNotProvenYet(t *testing.T) {
	p, err := Choose(Build(estate()), Point{At: at(110)})
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(numbers(p)) != "[4 5 6 7 8]" || p.Logs()[0].Proven == false || p.Logs()[4].Proven {
		t.Fatalf("logs %v (proven %v ... %v)", numbers(p), p.Logs()[0].Proven, p.Logs()[4].Proven)
	}
	if len(p.Warnings) == 0 || !strings.Contains(p.Warnings[0], "5, 6, 7, 8") {
		t.Fatalf("warnings %q", p.Warnings)
	}
}

// A hole in the chain (log 6 missing: log 7 begins after log 5 ended): a
// point beyond it is refused naming the gap; the latest stops before it.
func TestChooseStopsAtAGap(t *testing.T) {
	servers := estate()
	for i := range servers {
		r := *servers[i].Chains[0]
		r.Logs = append(append([]catalog.LogBackup(nil), r.Logs[:5]...), r.Logs[6:]...)
		r.Logs[5].FirstLSN = lsn(80) // log 7 began where log 6 should have ended
		servers[i].Chains = []*catalog.ChainRecord{&r}
	}
	c := Build(servers)
	_, err := Choose(c, Point{At: at(100)})
	unreachable(t, err, "reach 2026-03-01T11:15:00Z at the latest", "gap after log 5")
	p, err := Choose(c, Point{Latest: true})
	if err != nil || fmt.Sprint(numbers(p)) != "[4 5]" || !p.RecoveryPoint.Equal(at(75)) || !p.RecoveryPointBound.Equal(at(76)) {
		t.Fatalf("latest: logs %v recovery point %s bound %s, %v; want logs 4-5 to log 5's start, bounded by its finish", numbers(p),
			p.RecoveryPoint, p.RecoveryPointBound, err)
	}
	if !strings.Contains(strings.Join(p.Warnings, "\n"), "gap after log 5") {
		t.Fatalf("warnings %q do not name the gap", p.Warnings)
	}
	// Before the gap still works.
	if p, err := Choose(c, Point{At: at(70)}); err != nil || fmt.Sprint(numbers(p)) != "[4 5]" {
		t.Fatalf("before the gap: %v, %v", numbers(p), err)
	}
}

// A chain broken between two fulls (switched to SIMPLE and back): chain 1
// ends after log 3, chain 2 starts on set 3 (minute 100). A point between
// log 3's start and set 3's finish is unreachable, naming the break; one
// after set 3 restores from it with chain 2.
func TestChooseAcrossABrokenChain(t *testing.T) {
	s1 := set(1, catalog.StateVerified, 0, 10, 20, "bak01", "bak02")
	s3 := set(3, catalog.StateVerified, 100, 200, 210, "bak01", "bak02")
	r1 := record(1, s1, log(1, 15, 25, 15, true, "bak01", "bak02"), log(2, 25, 35, 30, true, "bak01", "bak02"),
		log(3, 35, 45, 45, true, "bak01", "bak02"))
	r1.Break = &catalog.ChainBreak{Reason: "recovery_model_switch", Detail: "BACKUP LOG failed with 4214", At: at(60)}
	r2 := record(2, s3, log(1, 205, 215, 110, true, "bak01", "bak02"), log(2, 215, 225, 125, false, "bak01", "bak02"))
	srv := Server{Name: "bak02", Manifests: []*catalog.Manifest{s1, s3}, Chains: []*catalog.ChainRecord{r1, r2}}
	c := Build([]Server{srv})
	_, err := Choose(c, Point{At: at(80)})
	unreachable(t, err, "chain 1 broke at 2026-03-01T11:00:00Z (recovery_model_switch", "log 3 of chain 1")
	p, err := Choose(c, Point{At: at(120)})
	if err != nil || p.Full().Sequence != 3 || fmt.Sprint(numbers(p)) != "[1 2]" || p.Logs()[0].Chain != 2 {
		t.Fatalf("after set 3: set %d logs %v, %v", p.Full().Sequence, numbers(p), err)
	}
	// Before the break, chain 1 serves.
	if p, err := Choose(c, Point{At: at(40)}); err != nil || p.Full().Sequence != 1 || fmt.Sprint(numbers(p)) != "[1 2 3]" {
		t.Fatalf("before the break: set %d logs %v, %v", p.Full().Sequence, numbers(p), err)
	}
}

// The primary backup server is gone: only the remote's manifests and
// records are read. Set 2 is verified only there (bak01 missed the
// update, and is gone anyway); every step is read from bak02 alone.
func TestChooseFromTheRemoteSiteAlone(t *testing.T) {
	servers := estate()
	remote := servers[1]
	s2 := *remote.Manifests[1]
	remote.Manifests = []*catalog.Manifest{remote.Manifests[0], &s2}
	// On bak01 (reachable in the second case) set 2 is still "copied".
	stale := *servers[0].Manifests[1]
	stale.State = catalog.StateCopied
	servers[0].Manifests = []*catalog.Manifest{servers[0].Manifests[0], &stale}

	p, err := Choose(Build([]Server{remote}), Point{At: at(100)})
	if err != nil {
		t.Fatal(err)
	}
	if p.Full().Sequence != 2 || fmt.Sprint(p.Full().Servers) != "[bak02]" {
		t.Fatalf("full %d on %v, want set 2 on bak02", p.Full().Sequence, p.Full().Servers)
	}
	for _, l := range p.Logs() {
		if fmt.Sprint(l.Servers) != "[bak02]" {
			t.Fatalf("log %d on %v, want bak02 alone", l.Number, l.Servers)
		}
	}
	// Both reachable: the stale copy does not unmake set 2's verification.
	c := Build(servers)
	if c.Sets[0].Sequence != 2 || !c.Sets[0].Verified || fmt.Sprint(c.Sets[0].VerifiedOn) != "[bak02]" {
		t.Fatalf("set 2: %+v", c.Sets[0])
	}
}

// A newer set that is only copied (not verified) is not restored from,
// and a log held only on an unreachable server ends the latest restore
// before it.
func TestChooseNeverRestoresAnUnverifiedSetNorALogItCannotRead(t *testing.T) {
	servers := estate()
	s3 := set(3, catalog.StateCopied, 110, 95, 99, "bak01", "bak02")
	r := *servers[1].Chains[0]
	r.Logs = append([]catalog.LogBackup(nil), r.Logs...)
	w := log(9, 95, 105, 135, false, "bak01")
	w.State = catalog.LogWritten
	r.Logs = append(r.Logs, w)
	remote := Server{Name: "bak02", Manifests: []*catalog.Manifest{servers[1].Manifests[0], servers[1].Manifests[1], s3},
		Chains: []*catalog.ChainRecord{&r}}
	p, err := Choose(Build([]Server{remote}), Point{Latest: true})
	if err != nil {
		t.Fatal(err)
	}
	if p.Full().Sequence != 2 || fmt.Sprint(numbers(p)) != "[4 5 6 7 8]" {
		t.Fatalf("set %d logs %v, want set 2, logs 4-8", p.Full().Sequence, numbers(p))
	}
	all := strings.Join(p.Warnings, "\n")
	if !strings.Contains(all, "log 9 of chain 1 is held on no reachable backup server") || !strings.Contains(all, "set 3") {
		t.Fatalf("warnings %q", p.Warnings)
	}
	// Nothing verified at all: the error says what there is.
	for i := range remote.Manifests {
		m := *remote.Manifests[i]
		m.State = catalog.StateCopied
		remote.Manifests[i] = &m
	}
	_, err = Choose(Build([]Server{remote}), Point{Latest: true})
	unreachable(t, err, "no verified full backup", "set 2 (finished", "is copied, not verified")
}

// Untrusted manifests and records steer nothing, and are named.
func TestBuildIgnoresWhatNoKeySigned(t *testing.T) {
	servers := estate()
	forged := set(9, catalog.StateVerified, 200, 300, 310, "bak02")
	forged.Auth = catalog.AuthUnsigned
	servers[1].Manifests = append(servers[1].Manifests, forged)
	c := Build(servers[1:])
	if c.Sets[0].Sequence != 2 || len(c.Ignored) != 1 || !strings.Contains(c.Ignored[0], "not trusted") {
		t.Fatalf("sets from %d, ignored %q", c.Sets[0].Sequence, c.Ignored)
	}
}
