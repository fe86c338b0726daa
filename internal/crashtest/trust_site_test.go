package crashtest

// Helpers of the trust regression tests (trust_test.go): a second source
// instance, backup sets found by decoding every manifest on the backup
// servers (independent of the file-name format), T-SQL against the emulated
// instances, msdb restore history, bounded waits that say what a run was
// doing when it did not finish, and the statement log's overlaps.

import (
	"cmp"
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	mssqldb "github.com/microsoft/go-mssqldb"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.uber.org/zap"

	"github.com/backupcycle/backupcycle/internal/catalog"
	"github.com/backupcycle/backupcycle/internal/config"
	"github.com/backupcycle/backupcycle/internal/devserver"
	"github.com/backupcycle/backupcycle/internal/sqlsim"
	starter "github.com/backupcycle/backupcycle/starter/client"
	"github.com/backupcycle/backupcycle/workflows"
)

// backupServers are the site's backup servers, as configured and as their
// directories are keyed in site.dirs.
var backupServers = []string{"bak01", "bak02"}

// source is the configuration name of the site's source instance.
func (s *site) source() string { return s.inst }

// addSource starts a second source instance, name, with database db of size
// bytes, and adds the instance and entry (a complete databases[] item,
// indented as in newSite's configuration) to the site's configuration.
func (s *site) addSource(name, db string, size int64, entry string) *sqlsim.Instance {
	s.t.Helper()
	in := s.site.AddSource(name, db, size, entry)
	s.cfg = s.site.Config
	return in
}

// starterClient is the product's starter client on the site's task queue:
// it starts cycles under the canonical workflow id of their database.
func (s *site) starterClient(c client.Client, srv *devserver.Server) *starter.Client {
	return starter.New(c, config.Temporal{Address: srv.FrontendAddress(), Namespace: srv.Namespace(), TaskQueue: s.tq}, zap.NewNop())
}

// startCycle starts a cycle of instance/db the way `starter run` does.
func startCycle(t *testing.T, sc *starter.Client, instance, db string) client.WorkflowRun {
	t.Helper()
	run, err := sc.StartCycle(context.Background(), workflows.CycleInput{Database: db, Instance: instance})
	if err != nil {
		t.Fatalf("start a cycle of %s/%s: %v", instance, db, err)
	}
	return run
}

// startRaw starts a BackupCycle under id with input as JSON, as the Web UI
// or another service would (fields this test's Go types may not have).
func (s *site) startRaw(c client.Client, id string, input map[string]any) client.WorkflowRun {
	s.t.Helper()
	run, err := c.ExecuteWorkflow(context.Background(), client.StartWorkflowOptions{ID: id, TaskQueue: s.tq},
		workflows.BackupCycleName, input)
	if err != nil {
		s.t.Fatalf("start %s %v: %v", id, input, err)
	}
	return run
}

// finish waits at most limit for run's result. A run still going then is
// described (its pending activities, attempts and last failures, which is
// what a reader needs to see why), terminated, and fails the test.
func finish(t *testing.T, c client.Client, run client.WorkflowRun, limit time.Duration) (workflows.CycleResult, error) {
	t.Helper()
	var res workflows.CycleResult
	err := finishInto(t, c, run, limit, &res)
	return res, err
}

// finishInto is finish decoding the result into out (e.g. a map, to read
// fields this test does not know by type).
func finishInto(t *testing.T, c client.Client, run client.WorkflowRun, limit time.Duration, out any) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	deadline, _ := ctx.Deadline()
	err := run.Get(ctx, out)
	// The SDK's long poll may end a moment before ctx does, with a gRPC
	// error of its own.
	if ctx.Err() == nil && time.Until(deadline) > 2*time.Second {
		return err
	}
	dctx, dcancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer dcancel()
	if d, derr := c.DescribeWorkflowExecution(dctx, run.GetID(), run.GetRunID()); derr == nil &&
		d.GetWorkflowExecutionInfo().GetStatus() != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
		return run.Get(dctx, out) // it ended just now
	}
	pending := pendingActivities(c, run)
	tctx, tcancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer tcancel()
	_ = c.TerminateWorkflow(tctx, run.GetID(), run.GetRunID(), "test time limit")
	t.Fatalf("workflow %s did not finish within %s (terminated); pending activities: %s", run.GetID(), limit, pending)
	return nil
}

// pendingActivities describes what a run is waiting for.
func pendingActivities(c client.Client, run client.WorkflowRun) string {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	d, err := c.DescribeWorkflowExecution(ctx, run.GetID(), run.GetRunID())
	if err != nil {
		return "(describe: " + err.Error() + ")"
	}
	var parts []string
	for _, a := range d.GetPendingActivities() {
		p := fmt.Sprintf("%s attempt %d (%s)", a.GetActivityType().GetName(), a.GetAttempt(), a.GetState())
		if f := a.GetLastFailure(); f != nil {
			p += ", last failure: " + f.GetMessage()
			if tf := f.GetTimeoutFailureInfo(); tf != nil {
				p += " [" + tf.GetTimeoutType().String() + "]"
			}
		}
		parts = append(parts, p)
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, "; ")
}

// foundSet is one manifest found on a backup server.
type foundSet struct {
	server string // bak01, bak02
	file   string // the manifest's file name
	m      *catalog.Manifest
	// raw is the JSON as written, for fields newer than this test.
	raw map[string]any
}

func (f foundSet) String() string {
	return fmt.Sprintf("%s/%s (%s/%s seq %d, %s)", f.server, f.file, f.m.SourceInstance, f.m.Database, f.m.Sequence, f.m.State)
}

// sets decodes every manifest on the backup servers. File names are not
// interpreted: what a set is, is what its manifest records.
func (s *site) sets() []foundSet {
	s.t.Helper()
	var out []foundSet
	for _, srv := range backupServers {
		files, err := filepath.Glob(filepath.Join(s.dirs[srv], "*.manifest.json"))
		if err != nil {
			s.t.Fatal(err)
		}
		for _, p := range files {
			data, err := os.ReadFile(p)
			if err != nil {
				s.t.Fatal(err)
			}
			m, err := catalog.Decode(data)
			if err != nil {
				s.t.Fatalf("manifest %s/%s: %v", srv, filepath.Base(p), err)
			}
			var raw map[string]any
			if err := json.Unmarshal(data, &raw); err != nil {
				s.t.Fatalf("manifest %s/%s: %v", srv, filepath.Base(p), err)
			}
			out = append(out, foundSet{server: srv, file: filepath.Base(p), m: m, raw: raw})
		}
	}
	return out
}

// setsOf are the manifests of instance/db; seq > 0 selects one set.
func (s *site) setsOf(instance, db string, seq int64) []foundSet {
	s.t.Helper()
	var out []foundSet
	for _, f := range s.sets() {
		if f.m.SourceInstance == instance && f.m.Database == db && (seq == 0 || f.m.Sequence == seq) {
			out = append(out, f)
		}
	}
	return out
}

// files hashes the manifest and the stripe files of f on its server, keyed
// server/name; files that are not there are left out.
func (s *site) files(f foundSet) map[string][32]byte {
	s.t.Helper()
	out := map[string][32]byte{}
	names := []string{f.file}
	for _, st := range f.m.Stripes {
		names = append(names, st.Name)
	}
	for _, n := range names {
		data, err := os.ReadFile(filepath.Join(s.dirs[f.server], n))
		if err != nil {
			continue
		}
		out[f.server+"/"+n] = sha256.Sum256(data)
	}
	return out
}

// filesOf hashes the files of every set of fs.
func (s *site) filesOf(fs []foundSet) map[string][32]byte {
	out := map[string][32]byte{}
	for _, f := range fs {
		for k, v := range s.files(f) {
			out[k] = v
		}
	}
	return out
}

// intact lists what is wrong with f's stripes on its server: missing, or
// size or SHA-256 other than the manifest records.
func (s *site) intact(f foundSet) []string {
	s.t.Helper()
	var bad []string
	if len(f.m.Stripes) == 0 {
		bad = append(bad, f.String()+": no stripes recorded")
	}
	for _, st := range f.m.Stripes {
		data, err := os.ReadFile(filepath.Join(s.dirs[f.server], st.Name))
		if err != nil {
			bad = append(bad, fmt.Sprintf("%s: stripe %s: %v", f, st.Name, err))
			continue
		}
		sum := sha256.Sum256(data)
		if int64(len(data)) != st.Size || (st.SHA256 != "" && hex.EncodeToString(sum[:]) != st.SHA256) {
			bad = append(bad, fmt.Sprintf("%s: stripe %s is %d bytes sha256 %x, manifest says %d bytes sha256 %s",
				f, st.Name, len(data), sum[:6], st.Size, st.SHA256))
		}
	}
	return bad
}

// verifiedSets groups the verified manifests of instance/db by sequence.
func (s *site) verifiedSets(instance, db string) map[int64][]foundSet {
	out := map[int64][]foundSet{}
	for _, f := range s.setsOf(instance, db, 0) {
		if f.m.State == catalog.StateVerified {
			out[f.m.Sequence] = append(out[f.m.Sequence], f)
		}
	}
	return out
}

// newestVerified is the verified set of instance/db that the manifests
// record as the newest backup (the latest BACKUP finish, not the highest
// number), with its manifests on every server; nil when there is none.
func (s *site) newestVerified(instance, db string) []foundSet {
	var newest []foundSet
	finish := func(fs []foundSet) time.Time {
		var t time.Time
		for _, f := range fs {
			if f.m.Header != nil && f.m.Header.BackupFinish.After(t) {
				t = f.m.Header.BackupFinish
			}
		}
		return t
	}
	for _, fs := range s.verifiedSets(instance, db) {
		if newest == nil || finish(fs).After(finish(newest)) ||
			finish(fs).Equal(finish(newest)) && fs[0].m.Sequence > newest[0].m.Sequence {
			newest = fs
		}
	}
	return newest
}

// checkNewestOnTwo asserts the promise for instance/db: its newest verified
// set is verified and intact on two backup servers.
func (s *site) checkNewestOnTwo(t *testing.T, instance, db string) {
	t.Helper()
	newest := s.newestVerified(instance, db)
	if newest == nil {
		t.Errorf("%s/%s has no verified set on any backup server (manifests: %v)", instance, db, s.setsOf(instance, db, 0))
		return
	}
	good := 0
	for _, f := range newest {
		if bad := s.intact(f); len(bad) > 0 {
			t.Errorf("newest verified set of %s/%s: %v", instance, db, bad)
			continue
		}
		good++
	}
	if good < 2 {
		t.Errorf("newest verified set of %s/%s (seq %d) is intact on %d backup server(s), want 2: %v",
			instance, db, newest[0].m.Sequence, good, newest)
	}
}

// partialFiles lists files on the backup servers that a copy or backup in
// progress writes (*.partial) and nothing finished may leave behind.
func (s *site) partialFiles() []string {
	var out []string
	for _, srv := range backupServers {
		files, _ := filepath.Glob(filepath.Join(s.dirs[srv], "*"))
		for _, p := range files {
			if strings.Contains(filepath.Base(p), ".partial") {
				out = append(out, srv+"/"+filepath.Base(p))
			}
		}
	}
	return out
}

// orphans lists the files on the backup servers that are neither a
// manifest nor a stripe a manifest on the same server lists.
func (s *site) orphans() []string {
	s.t.Helper()
	known := map[string]bool{}
	for _, f := range s.sets() {
		known[f.server+"/"+f.file] = true
		for _, st := range f.m.Stripes {
			known[f.server+"/"+st.Name] = true
		}
	}
	var out []string
	for _, srv := range backupServers {
		files, _ := filepath.Glob(filepath.Join(s.dirs[srv], "*"))
		for _, p := range files {
			if strings.Contains(filepath.Base(p), ".sequence.json") {
				continue // the sequence floor beside the manifests
			}
			if k := srv + "/" + filepath.Base(p); !known[k] {
				out = append(out, k)
			}
		}
	}
	return out
}

// openSQL is a go-mssqldb connection pool to an emulated instance's master.
func openSQL(t *testing.T, in *sqlsim.Instance) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlserver", in.DSN("sa", sqlPassword, "master"))
	if err != nil {
		t.Fatal(err)
	}
	return db
}

// execSQL runs stmt on an instance.
func execSQL(t *testing.T, in *sqlsim.Instance, stmt string) {
	t.Helper()
	db := openSQL(t, in)
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := db.ExecContext(ctx, stmt); err != nil {
		t.Fatalf("%s on %s: %v", stmt, in.Addr(), err)
	}
}

// queryInt returns the first column of the first row of query, an integer.
func queryInt(t *testing.T, in *sqlsim.Instance, query string) (int64, error) {
	t.Helper()
	db := openSQL(t, in)
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var n int64
	err := db.QueryRowContext(ctx, query).Scan(&n)
	return n, err
}

// databaseNames lists sys.databases of an instance.
func databaseNames(t *testing.T, in *sqlsim.Instance) []string {
	t.Helper()
	db := openSQL(t, in)
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rows, err := db.QueryContext(ctx, "SELECT name FROM sys.databases")
	if err != nil {
		t.Fatalf("sys.databases on %s: %v", in.Addr(), err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			t.Fatal(err)
		}
		out = append(out, n)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// restoreRecord is one row of msdb.dbo.restorehistory with the GUID of its
// msdb.dbo.backupset row (joined here: emulators before 4e75d73 have no joins).
type restoreRecord struct {
	id       int64
	database string
	guid     string
}

func restoreHistory(t *testing.T, in *sqlsim.Instance) []restoreRecord {
	t.Helper()
	db := openSQL(t, in)
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	guids := map[int64]string{}
	rows, err := db.QueryContext(ctx, "SELECT backup_set_id, backup_set_uuid FROM msdb.dbo.backupset")
	if err != nil {
		t.Fatalf("msdb.dbo.backupset on %s: %v", in.Addr(), err)
	}
	for rows.Next() {
		var id int64
		var u mssqldb.UniqueIdentifier
		if err := rows.Scan(&id, &u); err != nil {
			t.Fatal(err)
		}
		guids[id] = u.String()
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	rows.Close()
	rows, err = db.QueryContext(ctx, "SELECT restore_history_id, destination_database_name, backup_set_id FROM msdb.dbo.restorehistory")
	if err != nil {
		t.Fatalf("msdb.dbo.restorehistory on %s: %v", in.Addr(), err)
	}
	defer rows.Close()
	var out []restoreRecord
	for rows.Next() {
		var r restoreRecord
		var set int64
		if err := rows.Scan(&r.id, &r.database, &set); err != nil {
			t.Fatal(err)
		}
		r.guid = guids[set]
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// checkRestoredFrom asserts that verified set f was restored from its own
// backup: msdb's restore history on the verification instance has a restore
// of f's backup set GUID into f's verification database, and where the
// manifest records the proof, that very restore was of this set.
func checkRestoredFrom(t *testing.T, f foundSet, history []restoreRecord) {
	t.Helper()
	if f.m.Header == nil || f.m.Header.BackupSetGUID == "" {
		t.Errorf("verified %s records no backup set GUID", f)
		return
	}
	guid := f.m.Header.BackupSetGUID
	if !slices.ContainsFunc(history, func(r restoreRecord) bool {
		return strings.EqualFold(r.database, f.m.VerifyDB) && strings.EqualFold(r.guid, guid)
	}) {
		t.Errorf("verified %s (backup set %s) was never restored into %q: restore history %+v", f, guid, f.m.VerifyDB, history)
	}
	if proof, ok := f.raw["proof"].(map[string]any); ok {
		id, _ := proof["restore_history_id"].(float64)
		if !slices.ContainsFunc(history, func(r restoreRecord) bool { return r.id == int64(id) && strings.EqualFold(r.guid, guid) }) {
			t.Errorf("verified %s: proof %v names no restore of backup set %s (history %+v)", f, proof, guid, history)
		}
	}
}

// overlaps lists the pairs of statements whose run times overlap (a
// statement still running runs until now).
func overlaps(recs []sqlsim.StatementRecord) []string {
	end := func(r sqlsim.StatementRecord) time.Time {
		if r.End.IsZero() {
			return time.Now()
		}
		return r.End
	}
	slices.SortFunc(recs, func(a, b sqlsim.StatementRecord) int { return a.Start.Compare(b.Start) })
	var out []string
	for i, a := range recs {
		for _, b := range recs[i+1:] {
			if b.Start.Before(end(a)) && a.Start.Before(end(b)) {
				out = append(out, fmt.Sprintf("%s [%s] session %d %s-%s (%s) overlaps %s [%s] session %d %s-%s (%s)",
					a.Kind, a.Database, a.Session, a.Start.Format("15:04:05.000"), end(a).Format("15:04:05.000"), a.Outcome,
					b.Kind, b.Database, b.Session, b.Start.Format("15:04:05.000"), end(b).Format("15:04:05.000"), b.Outcome))
			}
		}
	}
	return out
}

// statementsOn are an instance's statements of the given kinds about
// databases for which match is true.
func statementsOn(in *sqlsim.Instance, match func(db string) bool, kinds ...string) []sqlsim.StatementRecord {
	var out []sqlsim.StatementRecord
	for _, r := range in.Statements() {
		if slices.Contains(kinds, r.Kind) && match(r.Database) {
			out = append(out, r)
		}
	}
	return out
}

// sortedKeys lists a map's keys in order, for messages.
func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.SortFunc(out, cmp.Compare)
	return out
}
