package cycle

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/backupcycle/backupcycle/activities"
	"github.com/backupcycle/backupcycle/internal/catalog"
	"github.com/backupcycle/backupcycle/internal/sitetest"
	"github.com/backupcycle/backupcycle/internal/storage/local"
	"github.com/backupcycle/backupcycle/internal/tsql"
)

// newChainFixture is the site of the retention tests with log chains:
// manifests and chain records signed, keep_verified as given.
// Other databases of the instance share its retention.
func newChainFixture(t *testing.T, keep int, others ...string) *cycleFixture {
	t.Helper()
	retention := fmt.Sprintf("    retention:\n      keep_verified: %d\n", keep)
	extra := retention
	for _, db := range others {
		extra += fmt.Sprintf("  - name: %q\n    instance: sql01\n    backup_servers: [bak01, bak02]\n", db) + retention
	}
	return newCycleFixtureOf(t, sitetest.Options{Database: "Sales", ManifestKeys: []string{"k1"}, Extra: extra})
}

// fullSet writes verified set seq of db on both servers with the header
// a full ending at LSN last has (its GUID derived from seq).
func (f *cycleFixture) fullSet(db string, seq int64, last int) *catalog.Manifest {
	f.t.Helper()
	m := f.writeSet("bak01", db, seq, catalog.StateVerified, "bak01", 1)
	fin := f.now.Add(-time.Duration(100-seq) * time.Hour)
	m.Header = &catalog.Header{BackupSetGUID: fmt.Sprintf("%08x-0000-4000-8000-%012x", seq, seq), FirstLSN: fmt.Sprint(last - 50),
		LastLSN: fmt.Sprint(last), BackupStart: fin.Add(-time.Minute), BackupFinish: fin}
	m.Header.SetUTCOffset(0)
	m.Servers = []string{"bak01", "bak02"}
	for _, s := range []string{"bak01", "bak02"} {
		for _, st := range m.Stripes {
			data, err := os.ReadFile(filepath.Join(f.dirs["bak01"], st.Name))
			if err != nil {
				f.t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(f.dirs[s], st.Name), data, 0o644); err != nil {
				f.t.Fatal(err)
			}
		}
		f.save(s, m)
	}
	return m
}

// logSpan is one log backup of a test chain: [first, last).
type logSpan struct{ first, last int }

// writeChain writes chain id of db with base full on both servers: its
// signed record (unsigned when sign is false) and its log backups' files.
// broken ends it.
func (f *cycleFixture) writeChain(db string, id int64, base *catalog.Manifest, logs []logSpan, broken, sign bool) *catalog.ChainRecord {
	f.t.Helper()
	r := catalog.NewChainRecord("sql01", db, id, 1, f.now.Add(-200*time.Hour))
	h := base.Header
	r.Fulls = []catalog.ChainFull{{Sequence: base.Sequence, BackupSetGUID: h.BackupSetGUID, FirstLSN: h.FirstLSN, LastLSN: h.LastLSN,
		CheckpointLSN: h.FirstLSN, FinishUTC: h.BackupFinishUTC}}
	for i, s := range logs {
		n := int64(i + 1)
		name := r.LogFileName(n, 1, 1)
		data := bytes.Repeat([]byte(fmt.Sprintf("%s log %d.%d|", db, id, n)), 8)
		sum := sha256.Sum256(data)
		at := h.BackupFinishUTC.Add(time.Duration(n) * time.Minute)
		l := catalog.LogBackup{Number: n, State: catalog.LogCopied, WorkflowID: "logchain/sql01/" + db, RunID: "r1",
			FirstLSN: fmt.Sprint(s.first), LastLSN: fmt.Sprint(s.last), BackupStart: at, BackupFinish: at.Add(time.Second),
			Files:   []catalog.Stripe{{Name: name, Size: int64(len(data)), SHA256: hex.EncodeToString(sum[:])}},
			Servers: []string{"bak01", "bak02"}, UpdatedAt: at}
		l.SetUTCOffset(0)
		r.Logs = append(r.Logs, l)
		for _, srv := range []string{"bak01", "bak02"} {
			if err := os.WriteFile(filepath.Join(f.dirs[srv], name), data, 0o644); err != nil {
				f.t.Fatal(err)
			}
		}
	}
	if broken {
		r.Break = &catalog.ChainBreak{Reason: "recovery_model_switch", Detail: "switched to SIMPLE and back", At: f.now.Add(-60 * time.Hour)}
	}
	keys := f.keys()
	if !sign {
		keys = nil
	}
	for _, srv := range []string{"bak01", "bak02"} {
		st, err := local.Open(context.Background(), f.dirs[srv])
		if err != nil {
			f.t.Fatal(err)
		}
		if err := catalog.SaveChain(context.Background(), catalog.StorageFS{Storage: st}, keys, r); err != nil {
			f.t.Fatal(err)
		}
		st.Close()
	}
	return r
}

// retain runs ApplyRetention for db on both servers.
func (f *cycleFixture) retain(db string, protect int64) activities.RetentionOutput {
	f.t.Helper()
	v, err := f.env.ExecuteActivity(f.acts.ApplyRetention, activities.RetentionInput{Database: db, Servers: []string{"bak01", "bak02"}, Protect: protect})
	if err != nil {
		f.t.Fatal(err)
	}
	var out activities.RetentionOutput
	if err := v.Get(&out); err != nil {
		f.t.Fatal(err)
	}
	return out
}

// holds reports whether every server holds file name.
func (f *cycleFixture) holds(name string) bool {
	for _, s := range []string{"bak01", "bak02"} {
		if _, err := os.Stat(filepath.Join(f.dirs[s], name)); err != nil {
			return false
		}
	}
	return true
}

// gone reports whether no server holds file name.
func (f *cycleFixture) gone(name string) bool {
	for _, s := range []string{"bak01", "bak02"} {
		if _, err := os.Stat(filepath.Join(f.dirs[s], name)); err == nil {
			return false
		}
	}
	return true
}

// A chain's record names the full it started from; a later verified full
// it does not name is no base its logs are restored from (the proofs and
// every point-in-time restore read the record). Set retention alone
// deletes that base once a newer set is verified, and with it the only
// way the record reaches any point since: the newest verified full the
// chains record is kept, with every log after it.
func TestRetentionKeepsTheFullTheChainStartsFrom(t *testing.T) {
	f := newChainFixture(t, 1)
	base := f.fullSet("Sales", 1, 1000)
	f.fullSet("Sales", 2, 1500) // verified later, not in the chain's record
	r := f.writeChain("Sales", 1, base, []logSpan{{800, 1200}, {1200, 1400}, {1400, 1600}, {1600, 1800}}, false, true)
	f.retain("Sales", 2)
	if !f.holds(tsql.ManifestFileName("sql01", "Sales", 1)) || !f.holds(tsql.StripeFileName("sql01", "Sales", 1, 1, 2)) {
		t.Errorf("set 1, the full log chain 1 starts from and the only one its record names, was deleted")
	}
	if !f.holds(tsql.ManifestFileName("sql01", "Sales", 2)) {
		t.Errorf("set 2, the newest verified set, was deleted")
	}
	for n := int64(1); n <= 4; n++ {
		if !f.holds(r.LogFileName(n, 1, 1)) {
			t.Errorf("log %d of the running chain was deleted", n)
		}
	}
	if !f.holds(r.FileName()) {
		t.Errorf("the running chain's record was deleted")
	}
}

// A chain that ended before the oldest kept verified full goes, logs
// first, record last; the chain after it stays whole. With two sets kept,
// the older of them lies inside the old chain: the logs from the one that
// holds its end on stay, the ones before go.
func TestRetentionDeletesChainsOlderThanTheOldestKeptFull(t *testing.T) {
	for _, keep := range []int{1, 2} {
		t.Run(fmt.Sprintf("keep %d", keep), func(t *testing.T) {
			f := newChainFixture(t, keep)
			s1 := f.fullSet("Sales", 1, 1000)
			f.fullSet("Sales", 2, 1500) // inside chain 1: log 3 holds its end
			s3 := f.fullSet("Sales", 3, 5000)
			c1 := f.writeChain("Sales", 1, s1, []logSpan{{800, 1200}, {1200, 1400}, {1400, 1600}, {1600, 1800}}, true, true)
			c2 := f.writeChain("Sales", 2, s3, []logSpan{{4900, 5100}, {5100, 5300}}, false, true)
			out := f.retain("Sales", 3)
			for n := int64(1); n <= 2; n++ {
				if !f.holds(c2.LogFileName(n, 1, 1)) {
					t.Errorf("log %d of chain 2, after the newest verified full, was deleted", n)
				}
			}
			if !f.holds(c2.FileName()) || !f.holds(tsql.ManifestFileName("sql01", "Sales", 3)) {
				t.Errorf("chain 2's record or its full was deleted")
			}
			switch keep {
			case 1:
				for n := int64(1); n <= 4; n++ {
					if !f.gone(c1.LogFileName(n, 1, 1)) {
						t.Errorf("log %d of chain 1, wholly older than the oldest kept full, is still there", n)
					}
				}
				if !f.gone(c1.FileName()) {
					t.Errorf("chain 1's record is still there")
				}
				if !slices.Contains(out.DeletedChains, activities.ChainRef{Server: "bak01", Chain: 1}) || out.DeletedLogs != 8 {
					t.Errorf("output: chains %v, %d log files; want chain 1 on both servers and 8 log files", out.DeletedChains, out.DeletedLogs)
				}
			case 2:
				for n, want := range map[int64]bool{1: false, 2: false, 3: true, 4: true} {
					if f.holds(c1.LogFileName(n, 1, 1)) != want {
						t.Errorf("log %d of chain 1 held: %v, want %v (set 2 ends inside log 3)", n, !want, want)
					}
				}
				if !f.holds(c1.FileName()) {
					t.Errorf("chain 1's record was deleted though set 2 is restored with its logs")
				}
			}
		})
	}
}

// A chain record no manifest key signed steers nothing: it keeps no full
// and deletes none of its logs on its own say. It goes, with its log
// files, once a signed chain numbered after it is itself deleted (chains
// are numbered upwards, so it was started before), never earlier.
func TestRetentionIgnoresAnUnsignedChainRecord(t *testing.T) {
	f := newChainFixture(t, 1)
	s1 := f.fullSet("Sales", 1, 1000)
	s2 := f.fullSet("Sales", 2, 3000)
	s3 := f.fullSet("Sales", 3, 5000)
	forged := f.writeChain("Sales", 1, s1, []logSpan{{800, 1200}, {1200, 1400}}, true, false)
	c2 := f.writeChain("Sales", 2, s2, []logSpan{{2900, 3100}}, true, true)
	f.retain("Sales", 2) // set 2 protected: chain 2 is needed
	if !f.holds(forged.FileName()) || !f.holds(forged.LogFileName(1, 1, 1)) {
		t.Fatalf("an unsigned chain record older than a kept signed chain, or its logs, was deleted")
	}
	if !f.gone(tsql.ManifestFileName("sql01", "Sales", 1)) {
		t.Errorf("set 1 was kept: an unsigned record naming it as its base must not keep it")
	}
	f.writeChain("Sales", 3, s3, []logSpan{{4900, 5100}}, false, true)
	f.retain("Sales", 3)
	for _, name := range []string{forged.FileName(), forged.LogFileName(1, 1, 1), forged.LogFileName(2, 1, 1), c2.FileName(), c2.LogFileName(1, 1, 1)} {
		if !f.gone(name) {
			t.Errorf("%s is still there once the signed chain after it went", name)
		}
	}
}

// Log chain names and set names never meet: a database named so that its
// sets' names (in the byte-for-byte naming of sets written before the
// case-safe one) start like Sales's chain 1 (Sales~<hash>~log000001), and
// one named like a set of Sales (Sales_00000005), keep their sets when
// Sales's chains go, and Sales's chains stay when their sets go.
func TestRetentionNamesOfChainsAndSetsAreDisjoint(t *testing.T) {
	chainLike := strings.TrimSuffix(strings.TrimPrefix(tsql.NamesOf("sql01", "Sales").ChainPrefix(1), "sql01@"), "_")
	others := []string{chainLike, "Sales_00000005"}
	f := newChainFixture(t, 1, others...)
	s1 := f.fullSet("Sales", 1, 1000)
	s3 := f.fullSet("Sales", 3, 5000)
	c1 := f.writeChain("Sales", 1, s1, []logSpan{{900, 1100}}, true, true)
	c2 := f.writeChain("Sales", 2, s3, []logSpan{{4900, 5100}}, false, true)
	if !strings.HasPrefix(tsql.LegacyNamesOf("sql01", chainLike).Stripe(40, 1, 2), tsql.NamesOf("sql01", "Sales").ChainPrefix(1)) {
		t.Fatalf("the test's database %q does not name its sets like Sales's chain 1", chainLike)
	}
	var keep []string
	for i, db := range others {
		m := f.fullSet(db, int64(10+i), 100)
		keep = append(keep, m.Stripes[0].Name, m.FileName())
		// The byte-for-byte naming of sets written before the case-safe one.
		legacy := catalog.New("sql01", db, 40, f.now.Add(-time.Hour))
		legacy.Naming = ""
		for j := 1; j <= 2; j++ {
			name := tsql.LegacyNamesOf("sql01", db).Stripe(40, j, 2)
			if err := os.WriteFile(filepath.Join(f.dirs["bak01"], name), []byte("legacy"), 0o644); err != nil {
				t.Fatal(err)
			}
			legacy.Stripes = append(legacy.Stripes, catalog.Stripe{Name: name, Size: 6})
			keep = append(keep, name)
		}
		legacy.Options.Stripes = 2
		f.save("bak01", legacy)
		keep = append(keep, legacy.FileName())
	}
	f.retain("Sales", 3)
	if !f.gone(c1.FileName()) || !f.gone(c1.LogFileName(1, 1, 1)) {
		t.Errorf("chain 1 of Sales, older than its oldest kept full, is still there")
	}
	for _, name := range keep {
		if _, err := os.Stat(filepath.Join(f.dirs["bak01"], name)); err != nil {
			t.Errorf("Sales's retention deleted %s of another database", name)
		}
	}
	// The other way round: their retention deletes no file of Sales's
	// chains.
	for _, db := range others {
		f.retain(db, 0)
	}
	if !f.holds(c2.FileName()) || !f.holds(c2.LogFileName(1, 1, 1)) || !f.holds(tsql.ManifestFileName("sql01", "Sales", 3)) {
		t.Errorf("another database's retention deleted a file of Sales")
	}
}
