package chaos

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"go.temporal.io/sdk/converter"

	"github.com/backupcycle/backupcycle/activities"
	cycleacts "github.com/backupcycle/backupcycle/activities/cycle"
	"github.com/backupcycle/backupcycle/internal/catalog"
	"github.com/backupcycle/backupcycle/internal/s3test"
)

// The object store of the fleet: vault01, a versitygw with Object Lock
// whose bucket receives the immutable copies (immutable_copy) of
// ImmutableTargets. The worker's user there may do only what
// s3test.WorkerPolicy allows (no version deleted, no governance bypassed).
const (
	Vault01      = "vault01"
	vaultBucket  = "chaos-vault"
	vaultPrefix  = "sets/"
	vaultWorker  = "chaosworker"
	vaultEnv     = "BC_CHAOS_VAULT01_SECRET"
	vaultRootEnv = "BC_CHAOS_VAULT01_ROOT_SECRET"
	// VaultBandwidth paces the uploads to vault01 so that a stripe takes
	// about a second and a cut meets an upload in flight.
	VaultBandwidth    = "1MiB"
	vaultBandwidthBps = 1 << 20
	// VaultPartSize is vault01's part_size, S3's smallest: CutTarget's
	// stripe is a multipart upload of two parts.
	VaultPartSize  = "5MiB"
	vaultPartBytes = 5 << 20
)

// CutTarget is the database FaultVaultCut aims at: one stripe (stripes: 1)
// of a CutTargetSize database, above VaultPartSize, so that the cut meets
// a multipart upload.
var CutTarget = Target{Sql01, SalesDB}

// CutTargetSize is CutTarget's size: its stripe is about 6 MiB, two parts
// (5 MiB and the rest) sent at once at VaultBandwidth, the short one on
// the store after two or three seconds and the other after six.
const CutTargetSize = 5 << 20

// ImmutableWithin is the fleet's immutable_within: a verified set older
// than this must be on vault01, locked, or its database out of objectives.
const ImmutableWithin = 45 * time.Second

// ImmutableTargets are the databases with immutable_copy: vault01.
var ImmutableTargets = []Target{{Sql01, SalesDB}, {Sql02, SharedDB}}

func immutableTarget(instance, db string) (Target, bool) {
	for _, t := range ImmutableTargets {
		if strings.EqualFold(t.Instance, instance) && strings.EqualFold(t.Database, db) {
			return t, true
		}
	}
	return Target{}, false
}

// Vault is versitygw on fixed ports and a state directory: killed, it
// starts again on the same directory and ports (the product's endpoint
// stays the same).
type Vault struct {
	srv          *s3test.Server // endpoint, admin API and root credentials
	workerSecret string
	port, admin  string
	cmd          *exec.Cmd
	done         chan struct{}
}

// startVault runs vault01 on dir, with its locked bucket and the
// worker's user.
func startVault(ctx context.Context, dir, rootSecret, workerSecret string) (*Vault, error) {
	p1, err := freePort()
	if err != nil {
		return nil, err
	}
	p2, err := freePort()
	if err != nil {
		return nil, err
	}
	v := &Vault{port: "127.0.0.1:" + strconv.Itoa(p1), admin: "127.0.0.1:" + strconv.Itoa(p2), workerSecret: workerSecret}
	v.srv = &s3test.Server{Endpoint: "http://" + v.port, Admin: "http://" + v.admin, RootAccess: "root", RootSecret: rootSecret, Dir: dir}
	if err := v.Start(); err != nil {
		return nil, err
	}
	if err := v.setup(ctx); err != nil {
		v.Close()
		return nil, err
	}
	return v, nil
}

// setup creates the locked bucket and the worker's user with its policy.
func (v *Vault) setup(ctx context.Context) error {
	return v.srv.WorkerBucket(ctx, vaultBucket, vaultWorker, v.workerSecret)
}

// Start runs versitygw (a no-op while it runs).
func (v *Vault) Start() error {
	if v.Up() {
		return nil
	}
	bin, err := s3test.Binary()
	if err != nil {
		return err
	}
	dir := v.srv.Dir
	for _, d := range []string{"data", "versions", "iam"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o700); err != nil {
			return err
		}
	}
	log, err := os.OpenFile(filepath.Join(dir, "versitygw.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer log.Close()
	cmd := exec.Command(bin, "--port", v.port, "--admin-port", v.admin, "--iam-dir", filepath.Join(dir, "iam"),
		"--health", "/health", "--quiet", "posix", "--versioning-dir", filepath.Join(dir, "versions"), filepath.Join(dir, "data"))
	cmd.Env = append(os.Environ(), "ROOT_ACCESS_KEY_ID="+v.srv.RootAccess, "ROOT_SECRET_ACCESS_KEY="+v.srv.RootSecret)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("chaos: start %s: %w", Vault01, err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	v.cmd, v.done = cmd, done
	// The port of the killed server may take a moment to be free again.
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if v.healthy() {
			return nil
		}
		select {
		case <-done:
			out, _ := os.ReadFile(filepath.Join(dir, "versitygw.log"))
			return fmt.Errorf("chaos: %s exited: %s", Vault01, lastLines(out, 3))
		case <-time.After(50 * time.Millisecond):
		}
	}
	v.Kill()
	return fmt.Errorf("chaos: %s not ready within 20s", Vault01)
}

func lastLines(b []byte, n int) string {
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return strings.Join(lines[max(len(lines)-n, 0):], " | ")
}

func (v *Vault) healthy() bool {
	c := http.Client{Timeout: time.Second}
	resp, err := c.Get(v.srv.Endpoint + "/health")
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// Up reports whether the process the harness started runs.
func (v *Vault) Up() bool {
	if v.done == nil {
		return false
	}
	select {
	case <-v.done:
		return false
	default:
		return true
	}
}

// Kill ends versitygw with SIGKILL (the store's host gone) and waits.
func (v *Vault) Kill() {
	if !v.Up() {
		return
	}
	_ = syscall.Kill(-v.cmd.Process.Pid, syscall.SIGKILL)
	<-v.done
}

// Close stops it for good.
func (v *Vault) Close() { v.Kill() }

// Endpoint is the URL the configuration names.
func (v *Vault) Endpoint() string { return v.srv.Endpoint }

// adminClient reads the bucket with the root user's credentials.
func (v *Vault) adminClient() *awss3.Client { return v.srv.Client() }

// workerClient is the worker's own S3 user, as configured.
func (v *Vault) workerClient() *awss3.Client {
	return s3test.Client(v.srv.Endpoint, vaultWorker, v.workerSecret)
}

// yaml is vault01's backup_servers: entry.
func (v *Vault) yaml() string {
	return fmt.Sprintf(`  - name: %s
    kind: s3
    bandwidth_limit: %s
    s3:
      endpoint: %s
      bucket: %s
      prefix: %s
      access_key_id: %s
      secret_access_key_env: %s
      lock_mode: compliance
      part_size: %s
`, Vault01, VaultBandwidth, v.srv.Endpoint, vaultBucket, vaultPrefix, vaultWorker, vaultEnv, VaultPartSize)
}

// attempt is one request the worker's credentials send against a locked
// version, and whether the store refused it.
type attempt struct {
	What    string
	Refused bool
	Err     string
}

// attack sends, with the worker's own credentials, every request that
// would destroy or weaken the locked version of key: delete the version
// (with and without a governance bypass), shorten its retention (in its
// compliance mode, and as governance with a bypass), then overwrite the
// key and delete it without a version. The last two are allowed by S3
// (a new version, a delete marker) and must leave the locked version as
// it was; the harness removes what they left with the root user. The
// first four must be refused.
func (v *Vault) attack(ctx context.Context, key, version string) ([]attempt, []string, error) {
	w := v.workerClient()
	short := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
	var out []attempt
	try := func(what string, err error) {
		a := attempt{What: what, Refused: err != nil}
		if err != nil {
			a.Err = firstLine(err.Error())
		}
		out = append(out, a)
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	_, err := w.DeleteObject(ctx, &awss3.DeleteObjectInput{Bucket: aws.String(vaultBucket), Key: &key, VersionId: &version})
	try("delete the version", err)
	_, err = w.DeleteObject(ctx, &awss3.DeleteObjectInput{Bucket: aws.String(vaultBucket), Key: &key, VersionId: &version,
		BypassGovernanceRetention: aws.Bool(true)})
	try("delete the version bypassing governance", err)
	_, err = w.PutObjectRetention(ctx, &awss3.PutObjectRetentionInput{Bucket: aws.String(vaultBucket), Key: &key, VersionId: &version,
		Retention: &types.ObjectLockRetention{Mode: types.ObjectLockRetentionModeCompliance, RetainUntilDate: &short}})
	try("shorten the retention to "+short.Format(time.RFC3339), err)
	_, err = w.PutObjectRetention(ctx, &awss3.PutObjectRetentionInput{Bucket: aws.String(vaultBucket), Key: &key, VersionId: &version,
		BypassGovernanceRetention: aws.Bool(true),
		Retention:                 &types.ObjectLockRetention{Mode: types.ObjectLockRetentionModeGovernance, RetainUntilDate: &short}})
	try("turn the lock to governance until "+short.Format(time.RFC3339)+" bypassing governance", err)

	// Allowed by S3 on a versioned bucket: what they leave is cleaned up.
	var left []string
	put, err := w.PutObject(ctx, &awss3.PutObjectInput{Bucket: aws.String(vaultBucket), Key: &key, Body: bytes.NewReader([]byte("overwritten by the worker's credentials\n"))})
	if err == nil && aws.ToString(put.VersionId) != "" {
		left = append(left, aws.ToString(put.VersionId))
	}
	del, err2 := w.DeleteObject(ctx, &awss3.DeleteObjectInput{Bucket: aws.String(vaultBucket), Key: &key})
	if err2 == nil && aws.ToString(del.VersionId) != "" {
		left = append(left, aws.ToString(del.VersionId))
	}
	var cleanErrs []error
	for _, ver := range left {
		if ver == version {
			continue
		}
		if _, err := v.adminClient().DeleteObject(ctx, &awss3.DeleteObjectInput{Bucket: aws.String(vaultBucket), Key: &key, VersionId: aws.String(ver)}); err != nil {
			cleanErrs = append(cleanErrs, fmt.Errorf("version %s: %w", ver, err))
		}
	}
	notes := []string{fmt.Sprintf("overwrite: %s; delete without a version: %s", okOr(err, "a new version above the locked one"),
		okOr(err2, "a delete marker above the locked version"))}
	return out, notes, errors.Join(cleanErrs...)
}

func okOr(err error, accepted string) string {
	if err == nil {
		return "accepted (" + accepted + ")"
	}
	return "refused (" + firstLine(err.Error()) + ")"
}

// injectVault applies a fault of the object store at the run's point.
func (s *Sim) injectVault(ctx context.Context, r *run) {
	v, p := s.F.vault, r.plan
	if v == nil {
		r.injected, r.missed = false, true
		return
	}
	switch p.Fault {
	case FaultVaultDown:
		v.Kill()
		r.at += " (" + Vault01 + " killed)"
		r.later(p.Heal, "restart "+Vault01, v.Start)
	case FaultVaultCut:
		// Only while the copy uploads: after it the cut meets nothing.
		if r.step != activities.StepImmutableCopy {
			r.injected, r.missed = false, true
			r.note("the immutable copy was over (step %s) before %.0f%% of its upload: nothing cut", r.step, p.Percent)
			return
		}
		v.Kill()
		r.at += fmt.Sprintf(" (%s killed %.1fs into the copy of seq %d, %d bytes, %.0f%% reported", Vault01,
			time.Since(r.stepSince).Seconds(), r.seq, r.uploadBytes, r.pct)
		down := p.Heal / 4
		if c := r.cut; c != nil {
			r.at += fmt.Sprintf("; multipart upload of %s mid-way: parts %v of %d on %s", c.Name, c.Parts, c.Need, Vault01)
			// A part is sent once the bandwidth limit let all its bytes
			// through: back before the next part's request, the store
			// would not be missed by the upload (the client retries a
			// broken connection). Down until the upload would have ended.
			down = max(down, time.Duration(c.Size)*time.Second/vaultBandwidthBps+2*time.Second)
		}
		r.at += ")"
		r.later(down, "restart "+Vault01, v.Start)
	case FaultVaultDelete:
		what, err := s.vaultAttack(ctx, p)
		if err != nil || what == "" {
			r.injected, r.missed = false, true
			if err != nil {
				r.note("no attack on %s: %v", Vault01, err)
			} else {
				r.note("no copied object on %s to attack yet", Vault01)
			}
			return
		}
		r.at += " (" + what + ")"
	}
}

// vaultAttack picks an object of a copied set (the manifests' records) and
// attacks its locked version with the worker's credentials; what was not
// refused, and the version's loss or change, is reported as I16 by the
// next Check.
func (s *Sim) vaultAttack(ctx context.Context, p Plan) (string, error) {
	files, _ := s.C.scan()
	var objs []vaultObject
	seen := map[string]bool{}
	for _, mf := range files {
		if !copied(mf.M) {
			continue
		}
		for _, o := range mf.M.Immutable.Objects {
			if k := o.Name + "|" + o.VersionID; !seen[k] && o.VersionID != "" {
				seen[k] = true
				objs = append(objs, vaultObject{Set: mf.ID.setKey, Name: o.Name, Version: o.VersionID})
			}
		}
	}
	if len(objs) == 0 {
		return "", nil
	}
	sort.Slice(objs, func(i, j int) bool { return objs[i].Name+objs[i].Version < objs[j].Name+objs[j].Version })
	o := objs[p.Pick%uint64(len(objs))]
	key := vaultPrefix + o.Name
	v := s.F.vault
	before, err := hashObject(ctx, v, key, o.Version)
	if err != nil {
		return "", fmt.Errorf("read %s version %s: %w", o.Name, o.Version, err)
	}
	tries, notes, cleanErr := v.attack(ctx, key, o.Version)
	after, aerr := hashObject(ctx, v, key, o.Version)
	// The next Check reads its bytes again.
	delete(s.C.vault.hashed, o.Name+"|"+o.Version)
	what := fmt.Sprintf("%s/%s seq %d object %s version %s", o.Set.Instance, o.Set.Database, o.Set.Sequence, o.Name, o.Version)
	refused := 0
	for _, a := range tries {
		if a.Refused {
			refused++
		}
	}
	s.C.vault.attacks += len(tries)
	s.C.vault.refused += refused
	s.C.later = append(s.C.later, func(add addFunc) {
		for _, a := range tries {
			if !a.Refused {
				add(16, "attack|"+o.Name+"|"+o.Version+"|"+a.What, "the worker's S3 credentials could %s of %s on %s", a.What, what, Vault01)
			}
		}
		switch {
		case aerr != nil && gone(aerr):
			add(16, "attack-gone|"+o.Name+"|"+o.Version, "%s is gone after the worker's credentials tried to delete it (%v)", what, firstLine(aerr.Error()))
		case aerr == nil && after != before:
			add(16, "attack-changed|"+o.Name+"|"+o.Version, "%s changed (SHA-256 %s, was %s) after the worker's credentials tried to overwrite it", what, after, before)
		}
	})
	out := fmt.Sprintf("%s: %d of %d refused; %s", what, refused, len(tries), strings.Join(notes, "; "))
	if cleanErr != nil {
		out += fmt.Sprintf("; cleanup: %v", firstLine(cleanErr.Error()))
	}
	return out, nil
}

// cutAfter is how long after the copy's start its upload reaches the
// plan's percent at VaultBandwidth (the set's size from its manifest).
func (s *Sim) cutAfter(r *run) time.Duration {
	if r.uploadBytes == 0 {
		r.cutStripes = nil
		name := catalog.New(r.plan.Target.Instance, r.plan.Target.Database, r.seq, time.Now()).FileName()
		for _, srv := range Servers {
			raw, err := readManifest(filepath.Join(s.F.ShareDir(srv), name))
			if err != nil {
				continue
			}
			if m, err := catalog.DecodeWith(raw, s.F.keys); err == nil {
				for _, st := range m.Stripes {
					r.uploadBytes += st.Size
				}
				r.cutStripes = m.Stripes
				break
			}
		}
	}
	if r.uploadBytes == 0 {
		return time.Duration(r.plan.Percent / 100 * 2 * float64(time.Second))
	}
	return time.Duration(float64(r.uploadBytes) / vaultBandwidthBps * r.plan.Percent / 100 * float64(time.Second))
}

// cutUpload is the multipart upload FaultVaultCut cut: the stripe, its
// upload id and the parts vault01 held at the cut of the Need it takes.
type cutUpload struct {
	Name     string
	Size     int64
	UploadID string
	Parts    []int32
	Need     int64
}

// multipartCut reports whether the run's set has a stripe above
// VaultPartSize (read from its manifest by cutAfter).
func (s *Sim) multipartCut(r *run) bool {
	for _, st := range r.cutStripes {
		if st.Size > vaultPartBytes {
			return true
		}
	}
	return false
}

// cutDue reports whether vault01 holds at least one part of a multipart
// upload of the run's stripes and not all of them (its ListParts, as the
// root user), noting that upload in r.cut.
func (s *Sim) cutDue(r *run) bool {
	v := s.F.vault
	if v == nil {
		return true // injectVault notes the miss
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	c := v.adminClient()
	for _, st := range r.cutStripes {
		need := (st.Size + vaultPartBytes - 1) / vaultPartBytes
		if need < 2 {
			continue
		}
		ups, err := c.ListMultipartUploads(ctx, &awss3.ListMultipartUploadsInput{Bucket: aws.String(vaultBucket), Prefix: aws.String(vaultPrefix + st.Name)})
		if err != nil {
			continue
		}
		for _, u := range ups.Uploads {
			parts, err := c.ListParts(ctx, &awss3.ListPartsInput{Bucket: aws.String(vaultBucket), Key: u.Key, UploadId: u.UploadId})
			if err != nil {
				continue
			}
			var nums []int32
			for _, pt := range parts.Parts {
				nums = append(nums, aws.ToInt32(pt.PartNumber))
			}
			if n := int64(len(nums)); n >= 1 && n < need && s.checkpointed(ctx, st.Name, aws.ToString(u.UploadId)) {
				sort.Slice(nums, func(i, j int) bool { return nums[i] < nums[j] })
				r.cut = &cutUpload{Name: st.Name, Size: st.Size, UploadID: aws.ToString(u.UploadId), Parts: nums, Need: need}
				return true
			}
		}
	}
	return false
}

// checkpointed reports whether a running CopyImmutable's last heartbeat
// names upload id of stripe name with a part done: the checkpoint a retry
// resumes from. Heartbeats are throttled (a second in the simulation), so
// a cut just after the first part may come before it; the upload of a
// retry without it starts again.
func (s *Sim) checkpointed(ctx context.Context, name, id string) bool {
	c := s.F.Client()
	if c == nil {
		return false
	}
	refs, err := s.openCycles(ctx)
	if err != nil {
		return false
	}
	for _, ref := range refs {
		d, err := c.DescribeWorkflowExecution(ctx, ref.ID, ref.RunID)
		if err != nil {
			continue
		}
		for _, pa := range d.GetPendingActivities() {
			if pa.GetActivityType().GetName() != "CopyImmutable" || pa.GetHeartbeatDetails() == nil {
				continue
			}
			var hb cycleacts.ImmutableHeartbeat
			if converter.GetDefaultDataConverter().FromPayloads(pa.GetHeartbeatDetails(), &hb) != nil {
				continue
			}
			if f := hb.Files[name]; f != nil && f.UploadID == id && len(f.Parts) > 0 {
				return true
			}
		}
	}
	return false
}

// cutResumed notes, once the run's cycles closed, what became of the cut
// upload: gone from vault01 (completed or aborted) and, from the workers'
// logs, the parts the attempt that completed it kept and the bytes it sent.
func (s *Sim) cutResumed(ctx context.Context, r *run) {
	c := r.cut
	state := "still open on " + Vault01
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := s.F.vault.adminClient().ListParts(ctx, &awss3.ListPartsInput{Bucket: aws.String(vaultBucket), Key: aws.String(vaultPrefix + c.Name),
		UploadId: aws.String(c.UploadID)}); err != nil {
		state = "no longer open on " + Vault01 + " (" + firstLine(err.Error()) + ")"
		if strings.Contains(err.Error(), "NoSuchUpload") {
			state = "completed (NoSuchUpload on " + Vault01 + ")"
		}
	}
	var resumed, other []string
	for _, name := range s.F.WorkerLogs() {
		data, err := os.ReadFile(name)
		if err != nil {
			continue
		}
		for _, line := range bytes.Split(data, []byte("\n")) {
			if !bytes.Contains(line, []byte(c.Name)) {
				continue
			}
			if !bytes.Contains(line, []byte("stripe upload resumed")) {
				var e struct {
					Msg string `json:"msg"`
					Err string `json:"error"`
				}
				if json.Unmarshal(line, &e) == nil && len(other) < 4 {
					other = append(other, firstLine(e.Msg+" "+e.Err))
				}
				continue
			}
			var e struct {
				Parts int   `json:"resumed_parts"`
				Sent  int64 `json:"sent"`
				Size  int64 `json:"size"`
			}
			if json.Unmarshal(line, &e) == nil {
				resumed = append(resumed, fmt.Sprintf("%d parts kept, %d of %d bytes sent", e.Parts, e.Sent, e.Size))
			}
		}
	}
	if len(resumed) == 0 {
		r.note("cut multipart upload of %s (parts %v of %d held at the cut): %s; no attempt resumed it (the workers' log on it: %s)", c.Name, c.Parts, c.Need, state,
			strings.Join(other, " | "))
		return
	}
	r.note("cut multipart upload of %s (parts %v of %d held at the cut): %s; resumed by the retry: %s", c.Name, c.Parts, c.Need, state,
		strings.Join(resumed, "; "))
}
