package activities

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"time"

	"go.temporal.io/sdk/activity"
	"go.uber.org/zap"

	"github.com/backupcycle/backupcycle/internal/catalog"
	"github.com/backupcycle/backupcycle/internal/config"
	"github.com/backupcycle/backupcycle/internal/evidence"
	"github.com/backupcycle/backupcycle/internal/storage"
	"github.com/backupcycle/backupcycle/internal/storage/location"
	"github.com/backupcycle/backupcycle/internal/storage/s3"
	"github.com/backupcycle/backupcycle/internal/tsql"
	"github.com/backupcycle/backupcycle/internal/version"
)

// EvidenceInput asks for the evidence record of a verified set.
type EvidenceInput struct {
	Database string `json:"database"`
	Instance string `json:"instance"`
	Entry    string `json:"entry,omitempty"`
	Sequence int64  `json:"seq"`
	// Servers are the backup servers holding the verified set: each one's
	// ledger records it as that server holds it.
	Servers []string `json:"servers"`
	// Immutable is the object store the set was just copied to
	// (immutable_copy), "" for none: the servers' ledgers are copied
	// there too, each record locked like the set.
	Immutable string `json:"immutable,omitempty"`
}

// EvidenceOutput is what was recorded where.
type EvidenceOutput struct {
	Recorded []EvidenceRecord `json:"recorded,omitempty"`
	// NotRecorded says, per server, why its ledger did not get the record
	// (or, for the object store, why the ledgers were not copied there).
	NotRecorded []string `json:"not_recorded,omitempty"`
	// Copied is how many records were copied to the object store now.
	Copied int `json:"copied,omitempty"`
}

// EvidenceRecord is one record appended.
type EvidenceRecord struct {
	Server string `json:"server"`
	Seq    int64  `json:"seq"`
	SHA256 string `json:"sha256"`
}

// RecordSetEvidence appends the record of a verified set (its identity,
// its manifest's and stripes' SHA-256, the restore proof, the CHECKDB and
// the sanity checks, the step times, this worker's build) to the ledger of
// each server holding it, signed with the configuration's evidence key.
// A server whose ledger cannot be written is reported in NotRecorded and
// counted (metrics.Recorder.EvidenceNotRecorded), never an error: the set
// stays verified. Only a missing key or bad input is an error. A retry
// does not record the set twice (evidence.Appender.AppendOnce).
func (a *Activities) RecordSetEvidence(ctx context.Context, in EvidenceInput) (EvidenceOutput, error) {
	defer a.Cycle.keepAlive(ctx)()
	d := &a.Cycle
	db, err := d.database(in.Instance, in.Database, in.Entry)
	if err != nil {
		return EvidenceOutput{}, err
	}
	if err := d.databaseServerList(db, "RecordSetEvidence's servers", in.Servers); err != nil {
		return EvidenceOutput{}, err
	}
	key, err := d.evidenceKey()
	if err != nil {
		return EvidenceOutput{}, err
	}
	app := evidence.Appender{Key: key, Now: d.now}
	var out EvidenceOutput
	log := a.loggerFor(ctx).With(zap.String("db", db.Name), zap.String("instance", db.Instance), zap.Int64("seq", in.Sequence),
		zap.String("step", StepEvidence))
	for _, s := range in.Servers {
		rec, err := a.recordSetOn(ctx, app, db, in.Sequence, s)
		if err != nil {
			log.Warn("evidence not recorded: the set stays verified", zap.String("server", s), zap.Error(err))
			a.recorder().EvidenceNotRecorded(db.Instance, db.Name, s)
			out.NotRecorded = append(out.NotRecorded, fmt.Sprintf("%s: %v", s, err))
			continue
		}
		log.Info("evidence recorded", zap.String("server", s), zap.Int64("record", rec.Seq))
		out.Recorded = append(out.Recorded, rec)
	}
	if in.Immutable != "" {
		n, err := a.copyLedgers(ctx, db, in.Immutable, in.Servers)
		out.Copied = n
		if err != nil {
			log.Warn("evidence ledger not copied to the object store", zap.String("server", in.Immutable), zap.Error(err))
			a.recorder().EvidenceNotRecorded(db.Instance, db.Name, in.Immutable)
			out.NotRecorded = append(out.NotRecorded, fmt.Sprintf("%s: %v", in.Immutable, err))
		}
	}
	return out, nil
}

// copyLedgers copies every record of the database's ledger on each of
// servers that its copy on the object store target (the database's
// immutable_copy) lacks, each object locked like the set's objects: the
// copy then shows records later removed from, or changed on, a server
// (evidence.Result.Compare). It returns how many it copied.
func (a *Activities) copyLedgers(ctx context.Context, db *config.Database, target string, servers []string) (int, error) {
	d := &a.Cycle
	if target != db.ImmutableCopy {
		return 0, d.notOfDatabase(db, "evidence copy target", target, "the immutable_copy", []string{db.ImmutableCopy})
	}
	srv, err := d.server(target)
	if err != nil {
		return 0, err
	}
	if !srv.IsObjectStore() {
		return 0, nonRetryable(ErrInvalidConfig, fmt.Errorf("immutable_copy %s of %s is not a kind: s3 backup server", srv.Name, db.ID()))
	}
	lock := s3.Lock{Mode: srv.S3.LockMode, Until: d.now().Add(db.ImmutableLock()).UTC().Truncate(time.Second)}
	store, err := location.OpenObjectStore(ctx, srv, lock)
	if err != nil {
		return 0, objectStoreError(srv.Name, err)
	}
	defer store.Close()
	n := 0
	for _, s := range servers {
		err := func() error {
			from, err := d.server(s)
			if err != nil {
				return err
			}
			st, err := d.openStorage(ctx, from)
			if err != nil {
				return err
			}
			defer st.Close()
			entries, err := evidence.List(ctx, st, db.Instance, db.Name)
			if err != nil {
				return err
			}
			have, err := evidence.ListDir(ctx, store, evidence.ImmutableDir(s, db.Instance, db.Name))
			if err != nil {
				return objectStoreError(srv.Name, err)
			}
			held := map[int64]bool{}
			for _, h := range have {
				held[h.Seq] = true
			}
			for _, e := range entries {
				if held[e.Seq] || e.Size == 0 {
					continue
				}
				data, err := storage.ReadFile(ctx, st, e.Name)
				if err != nil {
					return err
				}
				if _, err := store.Put(ctx, evidence.ImmutableFileName(s, db.Instance, db.Name, e.Seq), data, lock, true); err != nil {
					return objectStoreError(srv.Name, err)
				}
				n++
			}
			return nil
		}()
		if err != nil {
			return n, fmt.Errorf("the ledger of %s: %w", s, err)
		}
	}
	return n, nil
}

// recordSetOn appends set seq's record to server's ledger.
func (a *Activities) recordSetOn(ctx context.Context, app evidence.Appender, db *config.Database, seq int64, server string) (EvidenceRecord, error) {
	srv, err := a.Cycle.server(server)
	if err != nil {
		return EvidenceRecord{}, err
	}
	st, err := a.Cycle.openStorage(ctx, srv)
	if err != nil {
		return EvidenceRecord{}, err
	}
	defer st.Close()
	m, err := a.Cycle.loadManifest(ctx, st, db, seq)
	if err != nil {
		return EvidenceRecord{}, err
	}
	if !m.Trusted() {
		return EvidenceRecord{}, fmt.Errorf("manifest %s is not authenticated (%s): no evidence is recorded for it", m.FileName(), m.Auth)
	}
	// The manifest's bytes as they are now: the record vouches for them.
	data, err := storage.ReadFile(ctx, st, m.FileName())
	if err != nil {
		return EvidenceRecord{}, err
	}
	sum := sha256.Sum256(data)
	r, err := evidence.SetRecord(server, m, evidence.File{Name: m.FileName(), Size: int64(len(data)), SHA256: hex.EncodeToString(sum[:])},
		version.String())
	if err != nil {
		return EvidenceRecord{}, err
	}
	h, err := app.AppendOnce(ctx, st, r)
	if err != nil {
		return EvidenceRecord{}, err
	}
	return EvidenceRecord{Server: server, Seq: r.Seq, SHA256: h}, nil
}

// evidenceKey resolves the evidence signing key now; a configuration
// without one, or a key that cannot be read, is InvalidConfig (the error
// names the variable or file, never the key).
func (d *CycleDeps) evidenceKey() (*evidence.PrivateKey, error) {
	e := d.config().Evidence
	if !e.Signs() {
		return nil, nonRetryable(ErrInvalidConfig, fmt.Errorf("%s has no evidence.signing_key_env or signing_key_file: no evidence is recorded", d.config().File))
	}
	k, err := e.SigningKey()
	if err != nil {
		return nil, nonRetryable(ErrInvalidConfig, fmt.Errorf("%w: every worker needs the evidence signing key of %s", err, d.config().File))
	}
	return k, nil
}

// AppendEvidence appends r, a proof of the log chain's or the drill's
// activities, to the ledger on st (r.Server's), when the configuration
// keeps one with a signing key: best effort, like the set's record (a
// failure is logged and counted, never the proof's failure). The
// manifest of set seq of db, when seq > 0, is vouched for as st holds it.
func AppendEvidence(ctx context.Context, a *Activities, st storage.Storage, db *config.Database, seq int64, r *evidence.Record) {
	d := &a.Cycle
	if !d.config().Evidence.Signs() {
		return
	}
	log := a.loggerFor(ctx).With(zap.String("db", db.Name), zap.String("instance", db.Instance), zap.String("server", r.Server),
		zap.String("kind", string(r.Kind)))
	err := func() error {
		key, err := d.evidenceKey()
		if err != nil {
			return err
		}
		if seq > 0 {
			m, err := d.loadManifest(ctx, st, db, seq)
			if err != nil {
				return err
			}
			data, err := storage.ReadFile(ctx, st, m.FileName())
			if err != nil {
				return err
			}
			sum := sha256.Sum256(data)
			r.Files = append([]evidence.File{{Name: m.FileName(), Size: int64(len(data)), SHA256: hex.EncodeToString(sum[:])}}, r.Files...)
		}
		r.Instance, r.Database, r.Worker = db.Instance, db.Name, version.String()
		_, err = evidence.Appender{Key: key, Now: d.now}.AppendOnce(ctx, st, r)
		return err
	}()
	if err != nil {
		log.Warn("evidence not recorded: the proof stands", zap.Error(err))
		a.recorder().EvidenceNotRecorded(db.Instance, db.Name, r.Server)
		return
	}
	log.Info("evidence recorded", zap.Int64("record", r.Seq))
}

// CopyProof is the evidence record of a proof on a copy the log chain's
// proofs or a drill restored (copyName on copyInstance) from set m (nil:
// not known) and brought to the recovery point rp: the database's sanity
// checks held on it, and DBCC CHECKDB ran clean when checkDB. The run is
// the activity's workflow run.
func CopyProof(ctx context.Context, kind evidence.Kind, server string, db *config.Database, copyInstance, copyName string,
	m *catalog.Manifest, rp time.Time, checkDB bool) *evidence.Record {
	r := &evidence.Record{Kind: kind, Server: server, RecoveryPoint: rp.UTC(),
		Restore: &evidence.Restore{Instance: copyInstance, Database: copyName}, Sanity: &evidence.Sanity{Passed: true}}
	for _, c := range db.SanityChecks {
		r.Sanity.Checks = append(r.Sanity.Checks, c.Name)
	}
	if m != nil && m.Header != nil {
		r.Set = &evidence.Set{Sequence: m.Sequence, BackupSetGUID: m.Header.BackupSetGUID, FirstLSN: m.Header.FirstLSN,
			LastLSN: m.Header.LastLSN, TakenAt: m.TakenAt().UTC()}
		r.Restore.BackupSetGUID = m.Header.BackupSetGUID
	}
	if checkDB {
		if cmd, err := tsql.CheckDB(copyName); err == nil {
			r.CheckDB = &evidence.CheckDB{Command: cmd, Result: "clean: no errors reported"}
		}
	}
	if activity.IsActivity(ctx) {
		info := activity.GetInfo(ctx)
		r.WorkflowID, r.RunID = info.WorkflowExecution.ID, info.WorkflowExecution.RunID
	}
	return r
}
