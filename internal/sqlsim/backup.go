package sqlsim

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/backupcycle/backupcycle/internal/sqlsim/tds"
)

// backupOptions are the WITH options of BACKUP DATABASE.
type backupOptions struct {
	checksum, init, format, compression, copyOnly bool
	// differential: BACKUP DATABASE ... WITH DIFFERENTIAL (differential.go).
	differential bool
	// noRecovery: a tail-log backup (BACKUP LOG ... WITH NORECOVERY).
	noRecovery                          bool
	stats                               int
	bufferCount, maxTransfer, blockSize int
	name, description                   string
	// cipher encrypts every block's payload (WITH ENCRYPTION, backupenc.go).
	cipher *setCipher
}

func (x *execCtx) intOpt(opts map[string]expr, name string, def int) (int, error) {
	e, ok := opts[name]
	if !ok {
		return def, nil
	}
	if e == nil {
		return def, nil
	}
	v, err := (&env{x: x}).eval(e)
	if err != nil {
		return 0, err
	}
	n, ok := normValue(v).(int64)
	if !ok {
		return 0, sqlErr(102, 15, "Incorrect syntax near '%s'.", name)
	}
	return int(n), nil
}

func (x *execCtx) parseBackupOptions(s *backupStmt, stripes int) (backupOptions, error) {
	o := backupOptions{}
	if e := optionConflict(s.order, backupOpposites); e != nil {
		return o, e
	}
	for k := range s.opts {
		switch k {
		case "CHECKSUM":
			o.checksum = true
		case "NO_CHECKSUM", "NOINIT", "NOFORMAT", "NO_COMPRESSION", "STATS", "BUFFERCOUNT", "MAXTRANSFERSIZE",
			"BLOCKSIZE", "NAME", "DESCRIPTION", "SKIP", "NOSKIP", "NOREWIND", "NOUNLOAD", "CONTINUE_AFTER_ERROR", "STOP_ON_ERROR", "MEDIANAME":
		case "INIT":
			o.init = true
		case "FORMAT":
			o.format = true
		case "COMPRESSION":
			o.compression = true
		case "COPY_ONLY":
			o.copyOnly = true
		case "NORECOVERY":
			if !s.log {
				// A log-specific option (BACKUP (Transact-SQL), "Log-specific
				// options"); what BACKUP DATABASE says of it is not emulated.
				return o, errNotSupported("BACKUP DATABASE WITH NORECOVERY")
			}
			o.noRecovery = true
		case "DIFFERENTIAL":
			if s.log {
				return o, errNotSupported("BACKUP LOG WITH DIFFERENTIAL")
			}
			o.differential = true
		case "ENCRYPTION":
			if s.enc == nil {
				return o, sqlErr(102, 15, "Incorrect syntax near '%s'.", k)
			}
		case "MIRROR", "NO_TRUNCATE", "STANDBY":
			return o, errNotSupported("BACKUP WITH " + k)
		default:
			return o, sqlErr(102, 15, "Incorrect syntax near '%s'.", k)
		}
	}
	var err error
	if _, ok := s.opts["STATS"]; ok {
		if o.stats, err = x.intOpt(s.opts, "STATS", 10); err != nil {
			return o, err
		}
	}
	if o.maxTransfer, err = x.intOpt(s.opts, "MAXTRANSFERSIZE", 1<<20); err != nil {
		return o, err
	}
	if o.maxTransfer < 64<<10 || o.maxTransfer > 4<<20 || o.maxTransfer%(64<<10) != 0 {
		return o, opError("BACKUP DATABASE", errRange(o.maxTransfer, "MAXTRANSFERSIZE"))
	}
	if o.blockSize, err = x.intOpt(s.opts, "BLOCKSIZE", 65536); err != nil {
		return o, err
	}
	if o.blockSize < 512 || o.blockSize > 65536 || o.blockSize&(o.blockSize-1) != 0 {
		return o, opError("BACKUP DATABASE", errRange(o.blockSize, "BLOCKSIZE"))
	}
	if o.bufferCount, err = x.intOpt(s.opts, "BUFFERCOUNT", 4*stripes+2); err != nil {
		return o, err
	}
	if o.bufferCount < 1 {
		return o, opError("BACKUP DATABASE", errRange(o.bufferCount, "BUFFERCOUNT"))
	}
	if o.stats < 0 || o.stats > 100 {
		return o, opError("BACKUP DATABASE", errRange(o.stats, "STATS"))
	}
	for _, k := range []string{"NAME", "DESCRIPTION"} {
		if e := s.opts[k]; e != nil {
			v, err := (&env{x: x}).eval(e)
			if err != nil {
				return o, err
			}
			if k == "NAME" {
				o.name = toString(v)
			} else {
				o.description = toString(v)
			}
		}
	}
	return o, nil
}

// stripeOut is one stripe being written.
type stripeOut struct {
	t       target
	f       *os.File
	off     int64
	blocks  int64
	raw     int64
	stored  int64
	limit   *limiter // per stream
	shareLm *limiter // per share
	quota   *quotaTracker
	netErr  func() string // the OS error of a share lost mid-write, "" while it is there
	// maxFile is the size a file on the share cannot grow past
	// (SetShareFileLimit); 0 = none.
	maxFile int64
}

type quotaTracker struct {
	mu    sync.Mutex
	limit int64
	used  int64
}

func (q *quotaTracker) take(n int64) bool {
	if q == nil {
		return true
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.used+n > q.limit {
		return false
	}
	q.used += n
	return true
}

type block struct {
	seq        uint32
	fileID     uint16
	pageID     uint32
	raw        []byte
	stored     []byte // compressed payload
	compressed bool
}

// backupErr is a failure inside the pipeline, already in SQL Server terms.
type backupErr struct{ errs []*tds.Error }

func (e *backupErr) Error() string { return e.errs[0].Error() }

func (x *execCtx) backup(s *backupStmt) error {
	op := backupCommand(s)
	v, err := (&env{x: x}).eval(s.db)
	if err != nil {
		return err
	}
	dbName := toString(v)
	if e := errIdentTooLong(dbName); e != nil { // a name from a variable
		return opError(op, e)
	}
	d := x.in.lookupDB(dbName)
	if d == nil {
		return opError(op, errNoDatabase(dbName))
	}
	if err := x.mayBackup(d); err != nil {
		return err
	}
	if s.log && strings.EqualFold(d.Name, "master") {
		// "Cannot back up the log of the master database. Use BACKUP
		// DATABASE instead." (4212, Database Engine events and errors
		// 4000 to 4999).
		return opError(op, sqlErr(4212, 16, "Cannot back up the log of the master database. Use BACKUP DATABASE instead."))
	}
	if d.system {
		return opError(op, errNotSupported("BACKUP of system database "+d.Name))
	}
	if x.in.restoring(d) {
		return opError(op, errRestoring(d.Name))
	}
	if e := x.in.backupRefusal(d, s.log); e != nil {
		return opError(op, e)
	}
	o, err := x.parseBackupOptions(s, len(s.disks))
	if err != nil {
		return err
	}
	if err := x.in.agBackup(d, o.copyOnly); err != nil {
		return err
	}
	// The encryptor is checked before anything is written.
	var encHdr mediaHeader
	if s.enc != nil {
		sc, e := x.beginEncryption(s.enc, &encHdr)
		if e != nil {
			return opError(op, e)
		}
		o.cipher = sc
	}
	if o.noRecovery {
		// A tail-log backup WITH NORECOVERY "backs up the tail of the log
		// and leaves the database in the RESTORING state" (BACKUP
		// (Transact-SQL), NORECOVERY; "Tail-Log Backups (SQL Server)",
		// https://learn.microsoft.com/en-us/sql/relational-databases/backup-restore/tail-log-backups-sql-server),
		// so it takes the database exclusively, as a RESTORE does: another
		// session in it fails the statement with 3101 ("Database Engine
		// events and errors 3000 to 3999") and 3013. The hold lasts the
		// statement (x.req.target), as a RESTORE's does.
		x.in.mu.Lock()
		if x.in.dbInUseLocked(d, x.s) {
			x.in.mu.Unlock()
			return opError(op, sqlErr(3101, 16, "Exclusive access could not be obtained because the database is in use."))
		}
		x.req.target = d.Name
		x.in.mu.Unlock()
		defer func() {
			x.in.mu.Lock()
			x.req.target = ""
			x.in.mu.Unlock()
		}()
	}
	// Backup compression is an Enterprise/Standard/Developer feature: Web and
	// Express refuse WITH COMPRESSION (1844 "%ls is not supported on %ls.",
	// https://learn.microsoft.com/en-us/sql/sql-server/editions-and-components-of-sql-server-2022
	// "Backup compression"; 1844 in .../errors-events/database-engine-events-and-errors-1000-to-1999).
	// Without the option a backup is not compressed (the server option
	// "backup compression default" is 0 out of the box).
	if o.compression {
		switch strings.ToLower(x.in.cfg.Edition) {
		case "express", "web":
			return opError(op, sqlErr(1844, 16, "BACKUP DATABASE WITH COMPRESSION is not supported on %s.", x.in.editionName()))
		}
	}
	_, mtsGiven := s.opts["MAXTRANSFERSIZE"]
	compress, tdeFormat := x.tdeTransfer(d, mtsGiven, &o)
	if int64(o.bufferCount)*int64(o.maxTransfer) > x.in.cfg.MemoryBudget {
		return opError(op, errMemory())
	}
	if len(s.disks) > 64 {
		return opError(op, sqlErr(3205, 16, "Too many backup devices specified for backup or restore; only 64 are allowed."))
	}
	// Devices.
	var outs []*stripeOut
	seen := map[string]bool{}
	x.in.mu.Lock()
	streamRate := x.in.faults.streamRate
	x.in.mu.Unlock()
	quotas := map[string]*quotaTracker{}
	for _, e := range s.disks {
		pv, err := (&env{x: x}).eval(e)
		if err != nil {
			return err
		}
		t, oserr := x.in.resolve(toString(pv))
		if oserr != "" {
			return opError(op, errOpenDevice(t.raw, oserr))
		}
		key := strings.ToLower(t.local)
		if !t.null && seen[key] {
			return opError(op, sqlErr(3209, 16, "The backup device '%s' is specified more than once.", t.raw))
		}
		seen[key] = true
		rate := streamRate
		if t.null {
			rate = 0 // NUL is no stream to pace: a backup to it measures the reads (seed 004)
		}
		so := &stripeOut{t: t, limit: &limiter{rate: rate}, netErr: x.in.shareNetErr(t.share)}
		if t.share != nil {
			x.in.mu.Lock()
			so.shareLm = x.in.faults.shareLimit[t.share.prefix]
			so.maxFile = x.in.faults.fileLimit[t.share.prefix]
			if q, ok := x.in.faults.quota[t.share.prefix]; ok {
				if quotas[t.share.prefix] == nil {
					quotas[t.share.prefix] = &quotaTracker{limit: q, used: dirUsage(t.share.dir)}
				}
				so.quota = quotas[t.share.prefix]
			}
			x.in.mu.Unlock()
		}
		outs = append(outs, so)
	}
	var locals []string
	for _, so := range outs {
		if !so.t.null {
			locals = append(locals, so.t.local)
		}
	}
	// The operation counts (Start and Crash wait for it) from before it
	// takes its files until after it gives them back: a restart must not
	// find files still held by a BACKUP the crash ended.
	x.in.ops.Add(1)
	defer x.in.ops.Done()
	busy, release := x.in.devices.acquire(locals, true)
	if busy >= 0 {
		for _, so := range outs {
			if !so.t.null && so.t.local == locals[busy] {
				return opError(op, errOpenDevice(so.t.raw, osSharingViolation))
			}
		}
	}
	defer release()
	// Files held by another BACKUP fail at once (above); another data
	// backup of the database to other files is waited for.
	x.setCommand(op, d.ID, true)
	if !s.log {
		// A log backup may run beside a data backup ("You can back up the
		// log while any full backup is running", SQL Server transaction log
		// architecture and management guide).
		unlock, err := x.lockDataBackup(d.Name)
		if err != nil {
			return err
		}
		defer unlock()
	}
	for _, so := range outs {
		if so.t.null {
			continue
		}
		if st, err := os.Stat(so.t.local); err == nil {
			if st.IsDir() {
				return opError(op, errOpenDevice(so.t.raw, osAccessDenied))
			}
			if !o.init && !o.format {
				// Appending a second backup set to a media set is not
				// emulated: refuse rather than silently overwrite.
				return opError(op, errNotSupported(fmt.Sprintf("BACKUP onto the existing media '%s' without INIT or FORMAT (appending backup sets)", so.t.raw)))
			}
			if so.quota != nil {
				so.quota.used -= st.Size()
			}
		}
	}
	// Plan.
	var files []mediaFile
	var totalPages int64
	for _, f := range d.Files {
		files = append(files, mediaFile{FileID: f.FileID, Logical: f.Logical, Physical: f.Physical, Log: f.Log, Pages: f.Pages, FileGroup: fileGroup(f), UniqueID: newGUID(),
			Free: f.Free, Filestream: f.Filestream})
		totalPages += f.Pages
	}
	pagesPerBlock := int64(o.maxTransfer / PageSize)
	var totalBlocks int64
	for _, f := range d.Files {
		totalBlocks += (f.Pages + pagesPerBlock - 1) / pagesPerBlock
	}
	start := time.Now()
	var lsns backupLSNs
	var lerr *tds.Error
	if o.differential {
		lsns, lerr = x.in.beginDiffBackup(d)
	} else {
		lsns, lerr = x.in.beginBackup(d, s.log, start)
	}
	if lerr != nil {
		return opError(op, lerr)
	}
	firstLSN, lastLSN := lsns.first, lsns.last
	produce := produceFiles(x, d, o.checksum, pagesPerBlock)
	if s.log || o.differential {
		// A differential holds only what changed since its base
		// (differential.go): written as the records it redoes.
		totalPages = (int64(len(lsns.recs)) + logRowsPage - 1) / logRowsPage
		totalBlocks = (totalPages + pagesPerBlock - 1) / pagesPerBlock
		produce = produceLog(lsns.recs, pagesPerBlock)
	}
	x.in.mu.Lock()
	lastGood, access := d.LastGoodCheckDB, d.UserAccess
	x.in.mu.Unlock()
	mediaSet, backupSet := newGUID(), newGUID()
	hdr := mediaHeader{Format: 1, MediaSetGUID: mediaSet, BackupSetGUID: backupSet, Families: len(outs), Server: x.in.cfg.Name,
		Database: d.Name, DatabaseID: d.ID, DatabaseCreated: d.Created, User: x.s.login.User, Files: files,
		FirstLSN: firstLSN, LastLSN: lastLSN, CheckpointLSN: lsns.checkpoint, DatabaseLSN: lsns.databaseBackup,
		Type: lsns.hdrType, RecoveryModel: lsns.model, BeginsLogChain: lsns.beginsChain, LogEnd: lsns.logEnd, Forks: lsns.forks,
		Start: x.in.serverTime(start), Compressed: o.compression, Checksums: o.checksum, CopyOnly: o.copyOnly,
		BlockSize: o.blockSize, MaxTransferSize: o.maxTransfer, TotalPages: totalPages, TotalBlocks: totalBlocks,
		Name: o.name, Description: o.description, DatabaseFamilyGUID: x.in.familyGUID(d), Containment: d.Containment,
		SoftwareVersion: x.in.cfg.ProductVersion, TDEThumbprint: d.TDEThumbprint, TDECompressedFormat: tdeFormat,
		LastGoodCheckDB: lastGood, UserAccess: access, DiffBaseLSN: lsns.diffBaseLSN, DiffBaseGUID: lsns.diffBaseGUID,
		KeyAlgorithm: encHdr.KeyAlgorithm, EncryptorThumbprint: encHdr.EncryptorThumbprint, EncryptorType: encHdr.EncryptorType,
		EncryptedKey: encHdr.EncryptedKey}
	if o.compression {
		hdr.CompressionAlgorithm = x.in.compressionAlgorithm()
	}

	x.setCommand(op, d.ID, true)

	// Create the stripes and write their media headers.
	for i, so := range outs {
		if so.t.null {
			continue
		}
		f, err := os.OpenFile(so.t.local, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
		if err != nil {
			closeOuts(outs)
			return opError(op, errOpenDevice(so.t.raw, osErrText(err)))
		}
		so.f = f
		h := hdr
		h.Family, h.FamilyGUID = i+1, newGUID()
		b, err := encodeMediaHeader(&h)
		if err != nil {
			closeOuts(outs)
			return err
		}
		if err := so.write(x.ctx, b); err != nil {
			closeOuts(outs)
			return x.pipelineErr(op, err)
		}
	}

	var pagesDone atomic.Int64
	// The pipeline compresses only what compression reaches (tdeTransfer);
	// the set is WITH COMPRESSION all the same.
	po := o
	po.compression = compress
	err = x.runBackupPipeline(po, outs, pagesPerBlock, &pagesDone, totalPages, produce)
	if err == nil && x.isCrashed() {
		err = context.Canceled // a crash at 100 %: the trailers are never written
	}
	if err != nil {
		closeOuts(outs)
		return x.pipelineErr(op, err)
	}
	// Trailers: the set is complete only now. A data backup ends where the
	// log ended when its copy did, and carries the log records written
	// meanwhile (the redo part of a full backup).
	if !s.log {
		lastLSN, lsns.redo = x.in.endDataBackup(d, firstLSN)
	}
	finish := time.Now()
	var setRaw, setStored int64
	for _, so := range outs {
		setRaw += so.raw
		setStored += so.stored
	}
	for i, so := range outs {
		if so.f == nil {
			continue
		}
		if oserr := so.netErr(); oserr != "" {
			closeOuts(outs)
			return opError(op, errWriteFailed(so.t.raw, oserr))
		}
		t := &mediaTrailer{BackupSetGUID: backupSet, Family: i + 1, Blocks: so.blocks, RawBytes: so.raw, StoredBytes: so.stored,
			Finish: x.in.serverTime(finish), SetRawBytes: setRaw, SetStored: setStored, LastLSN: lastLSN, Redo: lsns.redo}
		b, err := encodeTrailer(t, so.off)
		if err == nil {
			_, err = so.f.WriteAt(b, so.off)
		}
		if err == nil {
			// A completed BACKUP is on stable media: msdb records it as
			// restorable the moment it returns. Flushing here puts that
			// cost inside the statement, where SQL Server has it.
			err = so.f.Sync()
		}
		if err == nil {
			err = so.f.Close()
			so.f = nil
		}
		if err != nil {
			closeOuts(outs)
			return opError(op, errWriteFailed(so.t.raw, osErrText(err)))
		}
	}
	for _, f := range d.Files {
		if s.log && !f.Log {
			continue
		}
		n := f.Pages
		if s.log {
			n = totalPages
		}
		x.info(4035, 0, fmt.Sprintf("Processed %d pages for database '%s', file '%s' on file 1.", n, d.Name, f.Logical))
	}
	secs := max(finish.Sub(start).Seconds(), 0.001)
	mb := float64(totalPages*PageSize) / (1 << 20) / secs
	x.in.mu.Lock()
	x.in.cat.BackupSets = append(x.in.cat.BackupSets, backupSetRow{ID: x.in.cat.NextBackupSetID, GUID: backupSet, MediaGUID: mediaSet,
		Database: d.Name, Start: x.in.serverTime(start), Finish: x.in.serverTime(finish), FirstLSN: firstLSN, LastLSN: lastLSN, CopyOnly: o.copyOnly,
		Checksums: o.checksum, Compressed: o.compression, Size: setRaw, CompSize: setStored, Server: x.in.cfg.Name,
		Name: o.name, Description: o.description, FamilyGUID: hdr.DatabaseFamilyGUID,
		Type: lsns.typ, CheckpointLSN: lsns.checkpoint, DatabaseBackupLSN: lsns.databaseBackup, User: x.s.login.User,
		Devices: deviceNames(outs), BeginsLogChain: lsns.beginsChain, RecoveryModel: lsns.model, Forks: lsns.forks,
		DiffBaseLSN: lsns.diffBaseLSN, DiffBaseGUID: lsns.diffBaseGUID, SoftwareVersion: x.in.cfg.ProductVersion,
		KeyAlgorithm: hdr.KeyAlgorithm, EncryptorThumbprint: hdr.EncryptorThumbprint, EncryptorType: hdr.EncryptorType})
	x.in.cat.NextBackupSetID++
	x.in.endBackupLocked(d, s.log, o.copyOnly, lsns, lastLSN)
	if !s.log && !o.copyOnly && !o.differential {
		// A conventional full is the base of the differentials after it;
		// a COPY_ONLY one never is (differential.go).
		d.DiffBaseGUID, d.DiffBaseLSN = backupSet, lsns.checkpoint
	}
	if o.noRecovery {
		// RESTORING from now on: later BACKUPs and every use of it fail
		// with 927 until a RESTORE ends the sequence, as after a RESTORE
		// WITH NORECOVERY; roll forward would continue at the tail's end.
		d.State, d.RedoLSN = "RESTORING", lastLSN
	}
	serr := x.in.saveCatalog()
	x.in.mu.Unlock()
	if serr != nil {
		x.in.log.Error("save catalog", zap.Error(serr))
	}
	x.info(3014, 0, fmt.Sprintf("%s successfully processed %d pages in %.3f seconds (%.3f MB/sec).", op, totalPages, secs, mb))
	return nil
}

func fileGroup(f dbFile) string {
	if f.Log {
		return ""
	}
	return "PRIMARY"
}

func closeOuts(outs []*stripeOut) {
	for _, so := range outs {
		if so.f != nil {
			so.f.Close()
			so.f = nil
		}
	}
}

func osErrText(err error) string {
	switch {
	case errors.Is(err, os.ErrNotExist):
		return osPathNotFound
	case errors.Is(err, os.ErrPermission):
		return osAccessDenied
	case errors.Is(err, errDiskFull):
		return osDiskFull
	}
	return "1117(The request could not be performed because of an I/O device error.)"
}

// pipelineErr turns a pipeline failure into the statement's result.
func (x *execCtx) pipelineErr(op string, err error) error {
	var be *backupErr
	switch {
	case errors.As(err, &be):
		return opError(op, be.errs...)
	case x.isCrashed():
		return tds.ErrKillConnection
	case errors.Is(err, context.Canceled):
		return err
	}
	return err
}

// write appends the parts (a block header and its payload, or a media
// header) to the stripe as one write, paced by the stream and share limits
// and charged to the share's quota: a BACKUP that stops leaves whole blocks.
// A share that went away while the file was open fails the write with the
// network error (see SetShareUnreachable, SetShareNetworkError).
func (so *stripeOut) write(ctx context.Context, parts ...[]byte) error {
	n := 0
	for _, b := range parts {
		n += len(b)
	}
	if err := so.limit.wait(ctx, n); err != nil {
		return err
	}
	if so.shareLm != nil {
		if err := so.shareLm.wait(ctx, n); err != nil {
			return err
		}
	}
	if so.t.null {
		so.off += int64(n)
		return nil
	}
	if oserr := so.netErr(); oserr != "" {
		return &backupErr{errs: []*tds.Error{errWriteFailed(so.t.raw, oserr)}}
	}
	if so.maxFile > 0 && so.off+int64(n) > so.maxFile {
		return &backupErr{errs: []*tds.Error{errWriteFailed(so.t.raw, osFileSystemLimit)}}
	}
	if !so.quota.take(int64(n)) {
		return &backupErr{errs: []*tds.Error{errWriteFailed(so.t.raw, osDiskFull)}}
	}
	for _, b := range parts {
		if _, err := so.f.WriteAt(b, so.off); err != nil {
			return &backupErr{errs: []*tds.Error{errWriteFailed(so.t.raw, osErrText(err))}}
		}
		so.off += int64(len(b))
	}
	return nil
}

// runBackupPipeline reads every page of every file in MAXTRANSFERSIZE
// blocks, compresses them on a worker pool when asked, hands block k to
// stripe k mod n (about BUFFERCOUNT blocks in flight), and reports progress
// from this goroutine while the stripes write.
func (x *execCtx) runBackupPipeline(o backupOptions, outs []*stripeOut, pagesPerBlock int64, done *atomic.Int64, total int64, produce blockProducer) error {
	ctx, cancel := context.WithCancel(x.ctx)
	defer cancel()
	var firstErr error
	var errOnce sync.Once
	fail := func(err error) {
		errOnce.Do(func() { firstErr = err; cancel() })
	}
	n := len(outs)
	perStripe := max(o.bufferCount/(2*n), 1)
	chans := make([]chan *block, n)
	for i := range chans {
		chans[i] = make(chan *block, perStripe)
	}
	pool := sync.Pool{New: func() any { return make([]byte, pagesPerBlock*PageSize) }}
	send := func(b *block) bool {
		select {
		case chans[int(b.seq)%n] <- b:
			return true
		case <-ctx.Done():
			return false
		}
	}
	// Compression workers sit between the reader and the stripes.
	work := make(chan *block, max(o.bufferCount/2, 1))
	var workers sync.WaitGroup
	if o.compression {
		for range runtime.GOMAXPROCS(0) {
			workers.Add(1)
			go func() {
				defer workers.Done()
				var c compressor
				for b := range work {
					if ctx.Err() != nil {
						continue
					}
					z, err := c.compress(b.raw)
					if err != nil {
						fail(err)
						continue
					}
					b.stored = append(pool.Get().([]byte)[:0], z...)
					b.compressed = true
					send(b)
				}
			}()
		}
	}
	var writers sync.WaitGroup
	for i, so := range outs {
		writers.Add(1)
		go func() {
			defer writers.Done()
			hdr := make([]byte, blockHdrSize)
			var sealed []byte // the encrypted payload (WITH ENCRYPTION)
			for b := range chans[i] {
				if ctx.Err() != nil {
					continue // drain
				}
				payload, flags := b.raw, uint16(0)
				if b.compressed {
					payload, flags = b.stored, flagCompress
				}
				if o.cipher != nil {
					if cap(sealed) < len(payload) {
						sealed = make([]byte, len(payload))
					}
					o.cipher.xor(b.seq, sealed[:len(payload)], payload)
					payload, flags = sealed[:len(payload)], flags|flagEncrypt
				}
				putBlockHeader(hdr, blockHeader{Seq: b.seq, RawLen: uint32(len(b.raw)), StoredLen: uint32(len(payload)),
					Flags: flags, FileID: b.fileID, PageID: b.pageID, CRC: crc32Checksum(payload)})
				if err := so.write(ctx, hdr, payload); err != nil {
					fail(err)
					continue
				}
				so.blocks++
				so.raw += int64(len(b.raw))
				so.stored += int64(len(payload)) + blockHdrSize
				done.Add(int64(len(b.raw) / PageSize))
				pool.Put(b.raw[:cap(b.raw)])
				if b.compressed {
					pool.Put(b.stored[:cap(b.stored)])
				}
			}
		}()
	}
	// Reader.
	go func() {
		defer func() {
			close(work)
			workers.Wait()
			for _, c := range chans {
				close(c)
			}
		}()
		produce(ctx, &pool, fail, func(b *block) bool {
			if !o.compression {
				return send(b)
			}
			select {
			case work <- b:
				return true
			case <-ctx.Done():
				return false
			}
		})
	}()
	writersDone := make(chan struct{})
	go func() {
		writers.Wait()
		close(writersDone)
	}()
	return x.watchProgress(ctx, OpBackup, writersDone, done, total, o.stats, &firstErr, fail)
}

// blockProducer hands the blocks of a backup set, in sequence, to emit
// (taken from pool); false from emit means stop.
type blockProducer func(ctx context.Context, pool *sync.Pool, fail func(error), emit func(*block) bool)

// produceFiles reads every page of every file of d: a data backup.
func produceFiles(x *execCtx, d *database, checksum bool, pagesPerBlock int64) blockProducer {
	return func(ctx context.Context, pool *sync.Pool, fail func(error), emit func(*block) bool) {
		var seq uint32
		for _, f := range d.Files {
			if !x.readFileBlocks(ctx, d, f, checksum, pagesPerBlock, &seq, pool, fail, emit) {
				return
			}
		}
	}
}

// readFileBlocks reads one database file in blocks (verifying page
// checksums WITH CHECKSUM) and passes them to emit; false means stop.
func (x *execCtx) readFileBlocks(ctx context.Context, d *database, f dbFile, checksum bool, pagesPerBlock int64,
	seq *uint32, pool *sync.Pool, fail func(error), emit func(*block) bool) bool {
	if oserr, ok := x.in.dataReadError(d.Name, f.FileID); ok {
		fail(&backupErr{errs: []*tds.Error{sqlErr(3203, 16, "Read on \"%s\" failed: %s", f.Physical, oserr)}})
		return false
	}
	fh, err := os.Open(f.Path)
	if err != nil {
		fail(&backupErr{errs: []*tds.Error{sqlErr(3203, 16, "Read on \"%s\" failed: %s", f.Physical, osErrText(err))}})
		return false
	}
	defer fh.Close()
	// The metadata pages (1..8 of the primary file) may span two blocks:
	// hold off metadata writers until both are read, so the backup carries
	// one consistent version.
	metaLocked := false
	if f.FileID == primaryFileID {
		x.in.metaMu.RLock()
		metaLocked = true
	}
	defer func() {
		if metaLocked {
			x.in.metaMu.RUnlock()
		}
	}()
	for p := int64(0); p < f.Pages; p += pagesPerBlock {
		cnt := min(pagesPerBlock, f.Pages-p)
		buf := pool.Get().([]byte)[:cnt*PageSize]
		x.in.rowsMu.RLock() // no half-written dbo.CommitLog page (workload.go)
		_, err := fh.ReadAt(buf, p*PageSize)
		x.in.rowsMu.RUnlock()
		if metaLocked && p+cnt > bootPages {
			x.in.metaMu.RUnlock()
			metaLocked = false
		}
		if err != nil && !errors.Is(err, io.EOF) {
			fail(&backupErr{errs: []*tds.Error{sqlErr(3203, 16, "Read on \"%s\" failed: %s", f.Physical, osErrText(err))}})
			return false
		}
		if checksum {
			for i := int64(0); i < cnt; i++ {
				if ok, _, _ := pageOK(buf[i*PageSize : (i+1)*PageSize]); !ok {
					fail(&backupErr{errs: []*tds.Error{sqlErr(3043, 16, "BACKUP '%s' detected an error on page (%d:%d) in file '%s'.", d.Name, f.FileID, p+i, f.Physical)}})
					return false
				}
			}
		}
		if !emit(&block{seq: *seq, fileID: uint16(f.FileID), pageID: uint32(p), raw: buf}) {
			return false
		}
		*seq++
	}
	return true
}

// watchProgress publishes percent_complete, streams "N percent processed."
// at every STATS step and fires an armed crash, until finished closes.
func (x *execCtx) watchProgress(ctx context.Context, op string, finished <-chan struct{}, done *atomic.Int64, total int64,
	stats int, firstErr *error, fail func(error)) error {
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	nextStat := stats
	report := func() error {
		pct := 100 * float64(done.Load()) / float64(max(total, 1))
		x.setPercent(pct)
		if x.in.crashDue(op, pct) {
			x.in.crashNow()
			fail(context.Canceled)
			return nil
		}
		if x.in.dropDue(op, pct) {
			x.dropConnection()
		}
		if e := x.fatalDue(op, pct); e != nil {
			fail(e)
			return nil
		}
		for stats > 0 && nextStat <= 100 && pct >= float64(nextStat) {
			if err := x.progress(3211, fmt.Sprintf("%d percent processed.", nextStat)); err != nil {
				fail(err)
				return err
			}
			nextStat += stats
		}
		return nil
	}
	for {
		select {
		case <-finished:
			if *firstErr != nil {
				return *firstErr
			}
			if err := x.ctx.Err(); err != nil {
				return err
			}
			return report()
		case <-tick.C:
			if ctx.Err() == nil {
				report()
			}
		}
	}
}
