package sqlsim

import (
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"strings"
	"time"

	"go.uber.org/zap"
)

// The workload: dbo.CommitLog(id bigint NOT NULL, committed_at
// datetime2(7) NOT NULL), one row per committed transaction, inserted at a
// steady rate by the emulator itself. It is what makes the log chain
// testable row by row: every row carries its commit time (the server's
// wall clock) and the LSN of its commit record, so a full backup must hold
// exactly the rows committed before its end, each log backup the rows of
// its LSN range, and a copy restored WITH STOPAT = T exactly the rows
// committed at or before T ("The recovery point is the latest transaction
// commit that occurred at or before the datetime value", "Restore a SQL
// Server Database to a Point in Time (Full Recovery Model)",
// https://learn.microsoft.com/en-us/sql/relational-databases/backup-restore/restore-a-sql-server-database-to-a-point-in-time-full-recovery-model).
//
// The rows live in data pages of the primary file (an extent reserved when
// the database is created), so BACKUP copies them and RESTORE writes them
// back like any other page. A row is a slot of commitRowSize bytes: id,
// commit time (wall clock, Unix nanoseconds of the zone-less value) and
// LSN; id 0 ends the table. The same three values are the log records a
// log backup carries.

const (
	commitRowSize   = 24
	commitRowsPage  = (PageSize - pageHeaderSize) / commitRowSize
	commitLogTable  = "CommitLog"
	commitLogObject = 1977058079
	// defaultCommitLogRows is the capacity of dbo.CommitLog when
	// DatabaseSpec.CommitLogRows is 0: an hour at 50 commits a second.
	defaultCommitLogRows = 180_000
	// logRowsPage is how many log records a page of a log backup holds
	// (after a 4-byte count).
	logRowsPage = (PageSize - pageHeaderSize - 4) / commitRowSize
)

// logRec is one committed transaction of the workload: its row and the
// LSN of its commit record.
type logRec struct {
	ID  int64  `json:"id"`
	At  int64  `json:"at"` // wall clock of the commit, Unix nanoseconds of the zone-less value
	LSN uint64 `json:"lsn"`
}

func (r logRec) committedAt() time.Time { return time.Unix(0, r.At).UTC() }

// commitLogState is what the emulator knows of a database's dbo.CommitLog
// between statements: where its pages are and how many rows it holds.
type commitLogState struct {
	ext   extentDef
	count int64 // -1 until counted
}

// addCommitLog reserves the pages of dbo.CommitLog at the end of the
// primary file and adds the table to md.
func addCommitLog(md *metadata, files []dbFile, rows int64) {
	if rows <= 0 {
		rows = defaultCommitLogRows
	}
	pages := (rows + commitRowsPage - 1) / commitRowsPage
	first := uint32(files[0].Pages)
	files[0].Pages += pages
	md.Tables = append(md.Tables, &tableDef{Schema: "dbo", Name: commitLogTable, ObjectID: commitLogObject, CommitLog: true,
		Columns: []columnDef{{Name: "id", Type: "bigint", NotNull: true}, {Name: "committed_at", Type: "datetime2", NotNull: true}},
		Extents: []extentDef{{FileID: primaryFileID, First: first, Count: uint32(pages)}}})
}

// emptyDataPage writes an empty page of table objectID.
func emptyDataPage(p []byte, fileID uint16, pageID, objectID uint32, lsn uint64) {
	clear(p)
	putPageHeader(p, pageHeader{PageID: pageID, FileID: fileID, Type: pageData, ObjectID: objectID, LSN: lsn})
	sealPage(p)
}

// commitLog returns d's dbo.CommitLog state, or nil when d has none.
func (in *Instance) commitLog(d *database) *commitLogState {
	in.mu.Lock()
	st, ok := in.commitLogs[d]
	in.mu.Unlock()
	if ok {
		return st
	}
	md, err := in.readMetadata(d)
	if err != nil {
		return nil // not cached: the files may be being restored
	}
	for _, t := range md.Tables {
		if t.CommitLog && len(t.Extents) == 1 {
			st = &commitLogState{ext: t.Extents[0], count: -1}
		}
	}
	in.mu.Lock()
	if in.commitLogs == nil {
		in.commitLogs = map[*database]*commitLogState{}
	}
	in.commitLogs[d] = st
	in.mu.Unlock()
	return st
}

// readCommitRows reads the rows of d's dbo.CommitLog; in.rowsMu is held
// (shared at least).
func (in *Instance) readCommitRowsLocked(d *database, st *commitLogState) ([]logRec, error) {
	f, err := os.Open(d.Files[0].Path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	buf := make([]byte, int64(st.ext.Count)*PageSize)
	if _, err := f.ReadAt(buf, int64(st.ext.First)*PageSize); err != nil {
		return nil, fmt.Errorf("read dbo.CommitLog of %s: %w", d.Name, err)
	}
	var out []logRec
	for p := 0; p < int(st.ext.Count); p++ {
		page := buf[p*PageSize : (p+1)*PageSize]
		for i := range commitRowsPage {
			off := pageHeaderSize + i*commitRowSize
			id := int64(binary.LittleEndian.Uint64(page[off:]))
			if id == 0 {
				st.count = int64(len(out))
				return out, nil
			}
			out = append(out, logRec{ID: id, At: int64(binary.LittleEndian.Uint64(page[off+8:])), LSN: binary.LittleEndian.Uint64(page[off+16:])})
		}
	}
	st.count = int64(len(out))
	return out, nil
}

// commitRows returns d's workload rows (none without dbo.CommitLog).
func (in *Instance) commitRows(d *database) ([]logRec, error) {
	st := in.commitLog(d)
	if st == nil {
		return nil, nil
	}
	in.rowsMu.RLock()
	defer in.rowsMu.RUnlock()
	return in.readCommitRowsLocked(d, st)
}

// writeCommitRowsLocked puts rows into their slots (slot id-1) of d's
// dbo.CommitLog, and clears every slot from clearFrom on (0: none); in.rowsMu
// is held exclusively. Rewriting a slot with its own row is harmless, which
// makes a RESTORE LOG that is run again after a crash idempotent.
func (in *Instance) writeCommitRowsLocked(d *database, st *commitLogState, rows []logRec, clearFrom int64) error {
	if len(rows) == 0 && clearFrom <= 0 {
		return nil
	}
	f, err := os.OpenFile(d.Files[0].Path, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	capacity := int64(st.ext.Count) * commitRowsPage
	pages := map[int64][]byte{}
	page := func(slot int64) ([]byte, error) {
		pn := slot / commitRowsPage
		if p, ok := pages[pn]; ok {
			return p, nil
		}
		p := make([]byte, PageSize)
		if _, err := f.ReadAt(p, (int64(st.ext.First)+pn)*PageSize); err != nil {
			return nil, err
		}
		pages[pn] = p
		return p, nil
	}
	for _, r := range rows {
		slot := r.ID - 1
		if slot < 0 || slot >= capacity {
			return fmt.Errorf("dbo.CommitLog of %s holds at most %d rows (DatabaseSpec.CommitLogRows)", d.Name, capacity)
		}
		p, err := page(slot)
		if err != nil {
			return err
		}
		off := pageHeaderSize + int(slot%commitRowsPage)*commitRowSize
		binary.LittleEndian.PutUint64(p[off:], uint64(r.ID))
		binary.LittleEndian.PutUint64(p[off+8:], uint64(r.At))
		binary.LittleEndian.PutUint64(p[off+16:], r.LSN)
	}
	if clearFrom > 0 {
		n := st.count
		if n < 0 {
			n = capacity
		}
		for slot := clearFrom - 1; slot < min(n, capacity); slot++ {
			p, err := page(slot)
			if err != nil {
				return err
			}
			off := pageHeaderSize + int(slot%commitRowsPage)*commitRowSize
			clear(p[off : off+commitRowSize])
		}
	}
	for pn, p := range pages {
		sealPage(p)
		if _, err := f.WriteAt(p, (int64(st.ext.First)+pn)*PageSize); err != nil {
			return err
		}
	}
	st.count = -1
	return nil
}

// applyLogRecs redoes log records into d (a RESTORE: full backup's redo
// part, RESTORE LOG).
func (in *Instance) applyLogRecs(d *database, recs []logRec) error {
	if len(recs) == 0 {
		return nil
	}
	st := in.commitLog(d)
	if st == nil {
		return fmt.Errorf("database %s has no dbo.CommitLog to redo %d commits into", d.Name, len(recs))
	}
	in.rowsMu.Lock()
	defer in.rowsMu.Unlock()
	return in.writeCommitRowsLocked(d, st, recs, 0)
}

// truncateCommitRows removes the rows whose commit is at or past lsn: what
// recovery undoes of a database that stopped rolling forward there.
func (in *Instance) truncateCommitRows(d *database, lsn uint64) error {
	st := in.commitLog(d)
	if st == nil {
		return nil
	}
	in.rowsMu.Lock()
	defer in.rowsMu.Unlock()
	rows, err := in.readCommitRowsLocked(d, st)
	if err != nil {
		return err
	}
	for _, r := range rows {
		if r.LSN >= lsn {
			return in.writeCommitRowsLocked(d, st, nil, r.ID)
		}
	}
	return nil
}

// commitOne commits one workload transaction in d: the next id, the
// server's wall clock, the next LSN of d's log.
func (in *Instance) commitOne(name string) error {
	d := in.lookupDB(name)
	if d == nil || d.system {
		return fmt.Errorf("database %s does not exist", name)
	}
	if !in.writable(d) {
		return nil // the application's commit waits
	}
	st := in.commitLog(d)
	if st == nil {
		return fmt.Errorf("database %s has no dbo.CommitLog (DatabaseSpec.CommitRate or CommitLog)", name)
	}
	in.rowsMu.Lock()
	defer in.rowsMu.Unlock()
	if st.count < 0 {
		if _, err := in.readCommitRowsLocked(d, st); err != nil {
			return err
		}
	}
	in.mu.Lock()
	if !writableLocked(d) || in.lookupDBLocked(name) != d {
		in.mu.Unlock()
		return nil
	}
	lsn := in.advanceLogLocked(d, 1)
	// committed_at is datetime2(7): 100 ns.
	at := wallClock(in.serverTime(time.Now())).Truncate(100 * time.Nanosecond).UnixNano()
	in.mu.Unlock()
	r := logRec{ID: st.count + 1, At: at, LSN: lsn}
	if err := in.writeCommitRowsLocked(d, st, []logRec{r}, 0); err != nil {
		return err
	}
	st.count = r.ID
	return nil
}

// writable reports whether the workload can commit in d now (not
// RESTORING, STANDBY, READ_ONLY or OFFLINE).
func (in *Instance) writable(d *database) bool {
	in.mu.Lock()
	defer in.mu.Unlock()
	return writableLocked(d)
}

func writableLocked(d *database) bool { return d.State == "" && !d.Standby && !d.ReadOnly }

// CommitNow commits one transaction of the workload in db at once (a test
// that needs a commit at a known moment).
func (in *Instance) CommitNow(db string) error {
	return in.commitOne(db)
}

// StartWorkload commits rows into db's dbo.CommitLog at perSecond rows a
// second until StopWorkload, Stop or Crash (Start resumes it); the
// database needs dbo.CommitLog (DatabaseSpec.CommitRate or CommitLog).
// Commits pause while the database is not writable (RESTORING, STANDBY,
// READ_ONLY, OFFLINE), as an application's would; a RESTORE over db keeps
// its workload.
func (in *Instance) StartWorkload(db string, perSecond float64) error {
	if perSecond <= 0 {
		return fmt.Errorf("sqlsim: StartWorkload %s: rate %v is not positive", db, perSecond)
	}
	d := in.lookupDB(db)
	if d == nil || d.system || in.commitLog(d) == nil {
		return fmt.Errorf("sqlsim: StartWorkload: database %q has no dbo.CommitLog; create it with DatabaseSpec.CommitLog or CommitRate", db)
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	d.CommitRate = perSecond
	in.startWorkloadLocked(d.Name, perSecond)
	return in.saveCatalog()
}

// StopWorkload stops db's workload.
func (in *Instance) StopWorkload(db string) {
	in.mu.Lock()
	defer in.mu.Unlock()
	if d := in.lookupDBLocked(db); d != nil {
		d.CommitRate = 0
		in.saveCatalog()
	}
	key := strings.ToLower(db)
	w, ok := in.workloads[key]
	delete(in.workloads, key)
	if ok {
		// No commit after StopWorkload returns; the goroutine's last
		// commit needs in.mu.
		in.mu.Unlock()
		w.stop()
		in.mu.Lock()
	}
}

// workload is a running workload goroutine.
type workload struct {
	cancel context.CancelFunc
	done   chan struct{}
}

// stop ends the goroutine and waits for it; in.mu is not held.
func (w workload) stop() {
	w.cancel()
	<-w.done
}

func (in *Instance) startWorkloadLocked(name string, perSecond float64) {
	key := strings.ToLower(name)
	if w, ok := in.workloads[key]; ok {
		w.cancel() // it ends at its next tick
	}
	if in.workloads == nil {
		in.workloads = map[string]workload{}
	}
	ctx, cancel := context.WithCancel(context.Background())
	w := workload{cancel: cancel, done: make(chan struct{})}
	in.workloads[key] = w
	interval := time.Duration(float64(time.Second) / perSecond)
	go func() {
		defer close(w.done)
		tick := time.NewTicker(max(interval, time.Millisecond))
		defer tick.Stop()
		start, done := time.Now(), int64(0)
		for {
			select {
			case <-ctx.Done():
				return
			case now := <-tick.C:
				// At rates above the ticker's, several commits per tick.
				due := int64(now.Sub(start).Seconds() * perSecond)
				for ; done < due && ctx.Err() == nil; done++ {
					if err := in.commitOne(name); err != nil {
						in.log.Warn("workload commit failed", zap.String("db", name), zap.Error(err))
						break
					}
				}
				done = due
			}
		}
	}()
}

// stopWorkloadsLocked ends every workload goroutine (Stop, Crash); the
// databases keep their CommitRate for Start. The caller waits for the
// returned workloads once it has released in.mu.
func (in *Instance) stopWorkloadsLocked() []workload {
	var out []workload
	for k, w := range in.workloads {
		w.cancel()
		out = append(out, w)
		delete(in.workloads, k)
	}
	return out
}

func waitWorkloads(ws []workload) {
	for _, w := range ws {
		<-w.done
	}
}

// recoverLogEndsLocked is what crash recovery gives the workload: the log
// of an online database goes on after the last commit it hardened. A
// commit writes its row, with its LSN, before it returns, but not the
// catalog that holds EndLSN, so after a crash EndLSN may lag behind the
// rows; LSNs are never handed out twice and only grow with time ("if
// LSN2 is greater than LSN1, the change described by the log record
// referred to by LSN2 occurred after", "SQL Server transaction log
// architecture and management guide",
// https://learn.microsoft.com/en-us/sql/relational-databases/sql-server-transaction-log-architecture-and-management-guide),
// and a log backup after the restart holds the commits made before it.
// in.mu is held (Start, before it serves: nothing else reads or writes
// rows yet).
func (in *Instance) recoverLogEndsLocked() {
	for _, d := range in.cat.Databases {
		if d.system || d.State != "" || d.Standby {
			continue // a database in a restore sequence has no log of its own yet
		}
		md, err := in.readMetadata(d)
		if err != nil {
			continue
		}
		for _, t := range md.Tables {
			if !t.CommitLog || len(t.Extents) != 1 {
				continue
			}
			rows, err := in.readCommitRowsLocked(d, &commitLogState{ext: t.Extents[0], count: -1})
			if err != nil {
				in.log.Warn("log end not recovered", zap.String("db", d.Name), zap.Error(err))
				continue
			}
			for _, r := range rows {
				d.EndLSN = max(d.EndLSN, r.LSN+1)
			}
		}
	}
}

// resumeWorkloadsLocked starts the workloads of the databases that have a
// CommitRate (Start).
func (in *Instance) resumeWorkloadsLocked() {
	for _, d := range in.cat.Databases {
		if d.CommitRate > 0 {
			in.startWorkloadLocked(d.Name, d.CommitRate)
		}
	}
}
