package sqlsim

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/klauspost/compress/flate"
	"go.uber.org/zap"

	"github.com/backupcycle/backupcycle/internal/sqlsim/tds"
)

func restoreOpName(kind string) string {
	switch kind {
	case "DATABASE":
		return "RESTORE DATABASE"
	case "VERIFYONLY":
		return "VERIFY DATABASE"
	case "LOG":
		return "RESTORE LOG"
	case "FILELISTONLY":
		return "RESTORE FILELIST"
	}
	return "RESTORE " + kind
}

func (x *execCtx) restore(s *restoreStmt) error {
	op := restoreOpName(s.kind)
	if e := optionConflict(s.order, restoreOpposites); e != nil {
		return e
	}
	for k := range s.opts {
		switch k {
		case "CHECKSUM", "NO_CHECKSUM", "REPLACE", "RECOVERY", "STATS", "FILE", "NOREWIND", "NOUNLOAD", "STOP_ON_ERROR", "LOADHISTORY",
			"ENABLE_BROKER", "ERROR_BROKER_CONVERSATIONS", "NEW_BROKER", "BUFFERCOUNT", "MAXTRANSFERSIZE":
		case "NORECOVERY", "STANDBY", "STOPAT", "STOPATMARK":
			if s.kind != "DATABASE" && s.kind != "LOG" {
				return errNotSupported("RESTORE " + s.kind + " WITH " + k)
			}
		case "STOPBEFOREMARK", "CONTINUE_AFTER_ERROR", "PARTIAL", "MEDIAPASSWORD", "PASSWORD", "RESTRICTED_USER":
			return errNotSupported("RESTORE WITH " + k)
		default:
			return sqlErr(102, 15, "Incorrect syntax near '%s'.", k)
		}
	}
	if n, err := x.intOpt(s.opts, "FILE", 1); err != nil {
		return err
	} else if n != 1 {
		return opError(op, sqlErr(3206, 16, "The backup set at position %d on the media does not exist (the emulator writes one backup set per media set).", n))
	}
	if err := x.restoreTransfer(s, op); err != nil {
		return err
	}
	if err := x.mayRestore(s, op); err != nil {
		return err
	}
	if s.kind == "DATABASE" && len(s.disks) == 0 {
		return x.recoverOnly(s, op)
	}
	needAll := s.kind == "DATABASE" || s.kind == "VERIFYONLY" || s.kind == "LOG"
	// Counted until the stripes are closed (see backup).
	x.in.ops.Add(1)
	defer x.in.ops.Done()
	stripes, err := x.openStripes(op, s.disks, needAll)
	if err != nil {
		return err
	}
	defer func() {
		for _, st := range stripes {
			st.close()
		}
	}()
	if err := x.mayRead(op, s.kind, stripes[0]); err != nil {
		return err
	}
	switch s.kind {
	case "HEADERONLY":
		return x.headerOnly(stripes[0])
	case "FILELISTONLY":
		return x.fileListOnly(stripes[0])
	case "LABELONLY":
		return errNotSupported("RESTORE LABELONLY")
	case "VERIFYONLY":
		// Not documented for VERIFYONLY; refused like RESTORE DATABASE, the
		// stricter choice (errTDEFormat).
		if stripes[0].hdr.TDECompressedFormat && !x.in.readsTDECompressedFormat() {
			return errTDEFormat(op, stripes[0].hdr.Database)
		}
		if err := x.qatRefused(op, stripes); err != nil {
			return err
		}
		if err := x.restoreData(s, op, stripes, nil, nil); err != nil {
			return err
		}
		x.info(3262, 0, "The backup set on file 1 is valid.")
		return nil
	case "LOG":
		if err := x.restoreRefusals(op, stripes); err != nil {
			return err
		}
		return x.restoreLog(s, op, stripes)
	}
	return x.restoreDatabase(s, op, stripes)
}

// openStripes opens and checks the media families of a RESTORE. needAll
// requires every family of the media set exactly once.
func (x *execCtx) openStripes(op string, disks []expr, needAll bool) ([]*stripe, error) {
	var out []*stripe
	fail := func(errs ...*tds.Error) ([]*stripe, error) {
		for _, st := range out {
			st.close()
		}
		return nil, opError(op, errs...)
	}
	for _, e := range disks {
		v, err := (&env{x: x}).eval(e)
		if err != nil {
			return fail(sqlErr(137, 15, "%s", err.Error()))
		}
		t, oserr := x.in.resolve(toString(v))
		if t.null {
			return fail(errOpenDevice(t.raw, osFileNotFound))
		}
		if oserr != "" {
			return fail(errOpenDevice(t.raw, oserr))
		}
		// A file a running BACKUP writes cannot be opened (see deviceTable).
		busy, release := x.in.devices.acquire([]string{t.local}, false)
		if busy >= 0 {
			return fail(errOpenDevice(t.raw, osSharingViolation))
		}
		f, err := os.Open(t.local)
		if err != nil {
			release()
			oe := osErrText(err)
			if errors.Is(err, os.ErrNotExist) {
				oe = osFileNotFound
			}
			return fail(errOpenDevice(t.raw, oe))
		}
		st := &stripe{path: t.raw, f: f, release: release, netErr: x.in.shareNetErr(t.share)}
		out = append(out, st)
		info, err := f.Stat()
		if err != nil {
			return fail(errIncorrectlyFormed(t.raw))
		}
		size := info.Size()
		// Reading a file cut short hits its end: 3203 with Windows error 38
		// (ERROR_HANDLE_EOF); an empty one is 3254; a complete file whose
		// structure is wrong, or one a BACKUP never finished (its blocks end
		// where the file ends, without the closing part), is "incorrectly
		// formed", 3241 (errors 3203, 3241, 3254 in
		// https://learn.microsoft.com/en-us/sql/relational-databases/errors-events/database-engine-events-and-errors-3000-to-3999;
		// error 38 in https://learn.microsoft.com/en-us/windows/win32/debug/system-error-codes--0-499-).
		if size == 0 {
			return fail(sqlErr(3254, 16, "The volume on device '%s' is empty.", t.raw))
		}
		hdr, start, err := readMediaHeader(f)
		if err != nil {
			if mediaHeaderCut(f, size) {
				return fail(errReadFailed(t.raw, osHandleEOF))
			}
			return fail(errIncorrectlyFormed(t.raw))
		}
		trl, end, err := readTrailer(f, size)
		if err != nil || trl.BackupSetGUID != hdr.BackupSetGUID || trl.Family != hdr.Family {
			if err != nil && unfinished(f, size, start) {
				return fail(errReadFailed(t.raw, osHandleEOF))
			}
			return fail(errIncorrectlyFormed(t.raw))
		}
		st.hdr, st.trl, st.start, st.end = hdr, trl, start, end
		if st.limit == nil {
			x.in.mu.Lock()
			st.limit = &limiter{rate: x.in.faults.streamRate}
			if t.share != nil {
				st.shareLm = x.in.faults.shareLimit[t.share.prefix]
			}
			x.in.mu.Unlock()
		}
	}
	first := out[0].hdr
	seen := map[int]string{}
	for _, st := range out {
		if st.hdr.MediaSetGUID != first.MediaSetGUID {
			return fail(sqlErr(3231, 16, "The media loaded on \"%s\" is formatted to support %d media families, but %d media families are expected according to the backup device specification.", st.path, st.hdr.Families, len(disks)))
		}
		if prev, dup := seen[st.hdr.Family]; dup {
			return fail(sqlErr(3227, 16, "The backup media on \"%s\" is a duplicate of family %d already provided by \"%s\". Remove it and provide the missing media families.", st.path, st.hdr.Family, prev))
		}
		seen[st.hdr.Family] = st.path
	}
	if needAll && len(out) < first.Families {
		return fail(sqlErr(3132, 16, "The media set has %d media families but only %d are provided. All members must be provided.", first.Families, len(out)))
	}
	if len(out) > first.Families {
		return fail(sqlErr(3231, 16, "The media loaded on \"%s\" is formatted to support %d media families, but %d media families are expected according to the backup device specification.", out[0].path, first.Families, len(out)))
	}
	return out, nil
}

func numericCol(name string, prec uint8) tds.Column {
	return tds.Column{Name: name, Type: tds.TypeNumeric, Precision: prec, Nullable: true}
}

func nv(name string, size int) tds.Column {
	return tds.Column{Name: name, Type: tds.TypeNVarChar, Size: size, Nullable: true}
}

func typed(name string, t tds.ColumnType) tds.Column {
	return tds.Column{Name: name, Type: t, Nullable: true}
}

func lsnText(n uint64) string { return itoa(int64(n)) }

// headerFamilyGUID is the family GUID of the database a backup holds
// (HEADERONLY FamilyGUID); media written before the header carried it get
// one derived from the database's identity.
func headerFamilyGUID(h *mediaHeader) guid {
	if h.DatabaseFamilyGUID != (guid{}) {
		return h.DatabaseFamilyGUID
	}
	sum := sha256.Sum256([]byte(fmt.Sprintf("%s|%d|%s|%d", h.Server, h.DatabaseID, h.Database, h.DatabaseCreated.UnixNano())))
	var g guid
	copy(g[:], sum[:16])
	return g
}

// setLastLSN is a backup set's LastLSN: a data backup learns it at its end
// (the trailer), a log backup at its start.
func setLastLSN(h *mediaHeader, t *mediaTrailer) uint64 {
	if t.LastLSN != 0 {
		return t.LastLSN
	}
	return h.LastLSN
}

func (x *execCtx) headerOnly(st *stripe) error {
	h, t := st.hdr, st.trl
	cols := []tds.Column{
		nv("BackupName", 128), nv("BackupDescription", 255), typed("BackupType", tds.TypeSmallInt),
		typed("ExpirationDate", tds.TypeDateTime), typed("Compressed", tds.TypeBit), typed("Position", tds.TypeSmallInt),
		typed("DeviceType", tds.TypeTinyInt), nv("UserName", 128), nv("ServerName", 128), nv("DatabaseName", 128),
		typed("DatabaseVersion", tds.TypeInt), typed("DatabaseCreationDate", tds.TypeDateTime), numericCol("BackupSize", 20),
		numericCol("FirstLSN", 25), numericCol("LastLSN", 25), numericCol("CheckpointLSN", 25), numericCol("DatabaseBackupLSN", 25),
		typed("BackupStartDate", tds.TypeDateTime), typed("BackupFinishDate", tds.TypeDateTime), typed("SortOrder", tds.TypeSmallInt),
		typed("CodePage", tds.TypeSmallInt), typed("UnicodeLocaleId", tds.TypeInt), typed("UnicodeComparisonStyle", tds.TypeInt),
		typed("CompatibilityLevel", tds.TypeTinyInt), typed("SoftwareVendorId", tds.TypeInt), typed("SoftwareVersionMajor", tds.TypeInt),
		typed("SoftwareVersionMinor", tds.TypeInt), typed("SoftwareVersionBuild", tds.TypeInt), nv("MachineName", 128),
		typed("Flags", tds.TypeInt), typed("BindingID", tds.TypeUniqueIdentifier), typed("RecoveryForkID", tds.TypeUniqueIdentifier),
		nv("Collation", 128), typed("FamilyGUID", tds.TypeUniqueIdentifier), typed("HasBulkLoggedData", tds.TypeBit),
		typed("IsSnapshot", tds.TypeBit), typed("IsReadOnly", tds.TypeBit), typed("IsSingleUser", tds.TypeBit),
		typed("HasBackupChecksums", tds.TypeBit), typed("IsDamaged", tds.TypeBit), typed("BeginsLogChain", tds.TypeBit),
		typed("HasIncompleteMetaData", tds.TypeBit), typed("IsForceOffline", tds.TypeBit), typed("IsCopyOnly", tds.TypeBit),
		typed("FirstRecoveryForkID", tds.TypeUniqueIdentifier), numericCol("ForkPointLSN", 25), nv("RecoveryModel", 60),
		numericCol("DifferentialBaseLSN", 25), typed("DifferentialBaseGUID", tds.TypeUniqueIdentifier), nv("BackupTypeDescription", 60),
		typed("BackupSetGUID", tds.TypeUniqueIdentifier), typed("CompressedBackupSize", tds.TypeBigInt), typed("Containment", tds.TypeTinyInt),
		nv("KeyAlgorithm", 32), typed("EncryptorThumbprint", tds.TypeVarBinary), nv("EncryptorType", 32),
	}
	cols[len(cols)-2].Size = 20 // EncryptorThumbprint varbinary(20)
	// SQL Server 2022 adds LastValidRestoreTime, TimeZone and
	// CompressionAlgorithm ("RESTORE Statements - HEADERONLY (Transact-SQL)").
	newer := x.in.cfg.MajorVersion >= 16
	if newer {
		cols = append(cols, typed("LastValidRestoreTime", tds.TypeDateTime), nv("TimeZone", 32), nv("CompressionAlgorithm", 32))
	}
	if err := x.w.Columns(cols); err != nil {
		return err
	}
	family := headerFamilyGUID(h)
	firstFork, lastFork, forkPoint := forkColumns(headerForks(h))
	flags := int64(512)
	if h.Checksums {
		flags |= 16
	}
	if h.CopyOnly {
		flags |= 1024
	}
	var name any = h.Name
	if h.Name == "" {
		name = nil
	}
	var desc any = h.Description
	if h.Description == "" {
		desc = nil
	}
	alg := "NONE"
	switch {
	case h.Compressed && h.CompressionAlgorithm == compressionQAT:
		alg = "QAT_DEFLATE"
	case h.Compressed:
		alg = "MS_XPRESS"
	}
	// The media's dates are the wall clock of the server that wrote
	// them, as it wrote them, whoever reads them and in whatever zone.
	created := h.DatabaseCreated
	if created.IsZero() {
		created = h.Start
	}
	// The writer's version: its build, internal database version and
	// compatibility level.
	major, minor, build := mediaVersion(h)
	writer := builds[16][0]
	if b, ok := builds[major]; ok {
		writer = b[0]
	}
	// A log backup is BackupType 2; captured output writes the
	// descriptions in mixed case ("Database", "Transaction Log").
	btype, bdesc, model := int64(1), "Database", h.RecoveryModel
	switch h.Type {
	case 2:
		btype, bdesc = 2, "Transaction Log"
	case 5:
		btype, bdesc = 5, "Database Differential"
	}
	diffBaseLSN, diffBaseGUID := diffBaseColumns(h.DiffBaseLSN, h.DiffBaseGUID)
	if model == "" {
		model = "FULL"
	}
	keyAlg, encTP, encType := encryptionColumns(h.KeyAlgorithm, h.EncryptorThumbprint, h.EncryptorType)
	row := []any{name, desc, btype, nil, h.Compressed, int64(1), int64(2), h.User, h.Server, h.Database,
		writer.dbVersion, created, itoa(t.SetRawBytes), lsnText(h.FirstLSN), lsnText(setLastLSN(h, t)), lsnText(h.CheckpointLSN),
		lsnText(h.DatabaseLSN), h.Start, t.Finish, int64(52), int64(0), int64(1033), int64(196609), writer.compat,
		int64(4608), int64(major), int64(minor), int64(build), h.Server, flags, [16]byte(newGUID()), lastFork,
		"SQL_Latin1_General_CP1_CI_AS", [16]byte(family), false, false, false, h.UserAccess == "SINGLE_USER", h.Checksums, false, h.BeginsLogChain,
		false, false, h.CopyOnly, firstFork, forkPoint, model, diffBaseLSN, diffBaseGUID, bdesc, [16]byte(h.BackupSetGUID),
		t.SetStored, int64(h.Containment), keyAlg, encTP, encType}
	if newer {
		row = append(row, nil, nil, alg)
	}
	err := x.w.Row(row...)
	if err != nil {
		return err
	}
	return x.w.StatementDone(tds.CmdSelect, 1, true)
}

func (x *execCtx) fileListOnly(st *stripe) error {
	h := st.hdr
	cols := []tds.Column{
		nv("LogicalName", 128), nv("PhysicalName", 260), {Name: "Type", Type: tds.TypeChar, Size: 1, Nullable: true},
		nv("FileGroupName", 128), numericCol("Size", 20), numericCol("MaxSize", 20), typed("FileID", tds.TypeBigInt),
		numericCol("CreateLSN", 25), numericCol("DropLSN", 25), typed("UniqueID", tds.TypeUniqueIdentifier),
		numericCol("ReadOnlyLSN", 25), numericCol("ReadWriteLSN", 25), typed("BackupSizeInBytes", tds.TypeBigInt),
		typed("SourceBlockSize", tds.TypeInt), typed("FileGroupID", tds.TypeInt), typed("LogGroupGUID", tds.TypeUniqueIdentifier),
		numericCol("DifferentialBaseLSN", 25), typed("DifferentialBaseGUID", tds.TypeUniqueIdentifier),
		typed("IsReadOnly", tds.TypeBit), typed("IsPresent", tds.TypeBit), {Name: "TDEThumbprint", Type: tds.TypeVarBinary, Size: 32, Nullable: true},
		nv("SnapshotURL", 360),
	}
	if err := x.w.Columns(cols); err != nil {
		return err
	}
	// TDEThumbprint: "the thumbprint of the Database Encryption Key. The
	// encryptor thumbprint is a SHA-1 hash of the certificate with which the
	// key is encrypted" ("RESTORE Statements - FILELISTONLY (Transact-SQL)").
	var tde any
	if h.TDEThumbprint != "" {
		tde, _ = hex.DecodeString(h.TDEThumbprint)
	}
	for _, f := range h.Files {
		// Size is the file's allocated size; BackupSizeInBytes what the
		// set holds of it.
		typ, fg, fgID, maxSize := "D", any(f.FileGroup), int64(1), "35184372080640"
		switch {
		case f.Log:
			typ, fg, fgID, maxSize = "L", nil, 0, "2199023255552"
		case f.Filestream:
			typ, fg, fgID, maxSize = "S", "FILESTREAM", 2, "-1"
		}
		if err := x.w.Row(f.Logical, f.Physical, typ, fg, itoa(f.bytes()), maxSize, int64(f.FileID), "0", nil,
			[16]byte(f.UniqueID), nil, nil, f.Pages*PageSize, int64(512), fgID, nil, "0", nil, false, true, tde, nil); err != nil {
			return err
		}
	}
	return x.w.StatementDone(tds.CmdSelect, int64(len(h.Files)), true)
}

// restoreTarget is where the pages of one database file go.
type restoreTarget struct {
	file dbFile
	f    *os.File
}

// restoreData reads every block of every stripe, verifies block and page
// checksums, and writes the pages to targets (nil for VERIFYONLY).
// sink, when given, gets every verified block's pages (RESTORE LOG).
func (x *execCtx) restoreData(s *restoreStmt, op string, stripes []*stripe, targets map[int]*restoreTarget,
	sink func(blockHeader, []byte) error) error {
	h := stripes[0].hdr
	_, wantChecksum := s.opts["CHECKSUM"]
	_, noChecksum := s.opts["NO_CHECKSUM"]
	verifyPages := (wantChecksum || h.Checksums) && !noChecksum
	stats := 0
	if _, ok := s.opts["STATS"]; ok {
		var err error
		if stats, err = x.intOpt(s.opts, "STATS", 10); err != nil {
			return err
		}
	}
	dec, e := x.in.readCipher(h)
	if e != nil {
		return opError(op, e)
	}
	dbID := x.currentDB().ID // the session's database, see restoreDatabase
	cmd := "RESTORE VERIFYONLY"
	crashOp := OpRestore
	if targets != nil {
		cmd = "RESTORE DATABASE"
	}
	if sink != nil {
		cmd = "RESTORE LOG"
	}
	x.setCommand(cmd, dbID, true)
	ctx, cancel := context.WithCancel(x.ctx)
	defer cancel()
	var firstErr error
	var once sync.Once
	fail := func(err error) { once.Do(func() { firstErr = err; cancel() }) }
	var done atomic.Int64
	seen := make([]atomic.Bool, h.TotalBlocks)
	dbName := h.Database
	if s.db != nil {
		if v, err := (&env{x: x}).eval(s.db); err == nil {
			dbName = toString(v)
		}
	}
	damaged := func(fileID int, page uint32) error {
		return &backupErr{errs: []*tds.Error{errPageDamaged(fileID, page, dbName)}}
	}
	// Stripe readers feed a pool of workers, so one compressed stripe still
	// decompresses on every core.
	maxBlock := h.MaxTransferSize
	pool := sync.Pool{New: func() any { return make([]byte, maxBlock+maxBlock/2+1024) }}
	work := make(chan restoreBlock, 2*len(stripes))
	var readers, workers sync.WaitGroup
	for range runtime.GOMAXPROCS(0) {
		workers.Add(1)
		go func() {
			defer workers.Done()
			if err := restoreWorker(ctx, work, dec, verifyPages, damaged, seen, &done, targets, sink, &pool, maxBlock); err != nil {
				fail(err)
				for range work { // keep the readers unblocked
				}
			}
		}()
	}
	for _, st := range stripes {
		readers.Add(1)
		go func() {
			defer readers.Done()
			if err := x.readStripe(ctx, st, damaged, seen, &pool, work); err != nil {
				fail(err)
			}
		}()
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		readers.Wait()
		close(work)
		workers.Wait()
	}()
	finished := make(chan struct{})
	go func() { wg.Wait(); close(finished) }()
	err := x.watchProgress(ctx, crashOp, finished, &done, h.TotalPages, stats, &firstErr, fail)
	if err != nil {
		return x.pipelineErr(op, err)
	}
	for i := range seen {
		if !seen[i].Load() {
			return opError(op, errIncorrectlyFormed(stripes[int64(i)%int64(len(stripes))].path))
		}
	}
	return nil
}

// restoreBlock is a block read from a stripe whose CRC matched, on its way
// to a worker that decompresses, verifies and writes it.
type restoreBlock struct {
	bh      blockHeader
	payload []byte
}

// readStripe reads the blocks of one stripe, checks their headers and
// CRCs, and hands them to the workers.
func (x *execCtx) readStripe(ctx context.Context, st *stripe, damaged func(int, uint32) error, seen []atomic.Bool,
	pool *sync.Pool, work chan<- restoreBlock) error {
	maxBlock := int64(st.hdr.MaxTransferSize)
	hdr := make([]byte, blockHdrSize)
	var blocks int64
	nextFile, nextPage := primaryFileID, uint32(0)
	off := st.start
	for off < st.end {
		if err := ctx.Err(); err != nil {
			return err
		}
		if off+blockHdrSize > st.end {
			return damaged(nextFile, nextPage)
		}
		if _, err := st.f.ReadAt(hdr, off); err != nil {
			return damaged(nextFile, nextPage)
		}
		bh, ok := parseBlockHeader(hdr)
		if !ok || int64(bh.StoredLen) > 2*maxBlock || int64(bh.RawLen) > maxBlock || bh.RawLen%PageSize != 0 ||
			int64(bh.Seq) >= int64(len(seen)) || off+blockHdrSize+int64(bh.StoredLen) > st.end {
			return damaged(nextFile, nextPage)
		}
		if err := st.limit.wait(ctx, blockHdrSize+int(bh.StoredLen)); err != nil {
			return err
		}
		if oserr := st.netErr(); oserr != "" { // the share went away mid-read
			return &backupErr{errs: []*tds.Error{errReadFailed(st.path, oserr)}}
		}
		if st.shareLm != nil {
			if err := st.shareLm.wait(ctx, blockHdrSize+int(bh.StoredLen)); err != nil {
				return err
			}
		}
		buf := pool.Get().([]byte)
		if cap(buf) < int(bh.StoredLen) {
			buf = make([]byte, bh.StoredLen)
		}
		payload := buf[:bh.StoredLen]
		if _, err := st.f.ReadAt(payload, off+blockHdrSize); err != nil {
			return damaged(int(bh.FileID), bh.PageID)
		}
		off += blockHdrSize + int64(bh.StoredLen)
		if crc32Checksum(payload) != bh.CRC {
			if bh.Flags&(flagCompress|flagEncrypt) == 0 {
				// Name the page that is damaged, as SQL Server does.
				for i := 0; i+PageSize <= len(payload); i += PageSize {
					if ok, _, _ := pageOK(payload[i : i+PageSize]); !ok {
						return damaged(int(bh.FileID), bh.PageID+uint32(i/PageSize))
					}
				}
			}
			return damaged(int(bh.FileID), bh.PageID)
		}
		select {
		case work <- restoreBlock{bh: bh, payload: payload}:
		case <-ctx.Done():
			return ctx.Err()
		}
		blocks++
		nextFile, nextPage = int(bh.FileID), bh.PageID+bh.RawLen/PageSize
	}
	if blocks != st.trl.Blocks {
		return &backupErr{errs: []*tds.Error{errIncorrectlyFormed(st.path)}}
	}
	return nil
}

// restoreWorker decrypts (dec, for a set taken WITH ENCRYPTION),
// decompresses, verifies and writes blocks.
func restoreWorker(ctx context.Context, work <-chan restoreBlock, dec *setCipher, verifyPages bool, damaged func(int, uint32) error,
	seen []atomic.Bool, done *atomic.Int64, targets map[int]*restoreTarget, sink func(blockHeader, []byte) error, pool *sync.Pool, maxBlock int) error {
	fr := flate.NewReader(bytes.NewReader(nil))
	raw := make([]byte, maxBlock)
	for b := range work {
		if ctx.Err() != nil {
			continue // drain
		}
		bh := b.bh
		if (bh.Flags&flagEncrypt != 0) != (dec != nil) {
			return damaged(int(bh.FileID), bh.PageID)
		}
		if dec != nil {
			dec.xor(bh.Seq, b.payload, b.payload)
		}
		pages := b.payload
		if bh.Flags&flagCompress != 0 {
			pages = raw[:bh.RawLen]
			fr.(flate.Resetter).Reset(bytes.NewReader(b.payload), nil)
			if _, err := io.ReadFull(fr, pages); err != nil {
				return damaged(int(bh.FileID), bh.PageID)
			}
		} else if len(pages) != int(bh.RawLen) {
			return damaged(int(bh.FileID), bh.PageID)
		}
		if verifyPages {
			for i := 0; i < len(pages); i += PageSize {
				p := pages[i : i+PageSize]
				pid := bh.PageID + uint32(i/PageSize)
				ph := readPageHeader(p)
				if ok, _, _ := pageOK(p); !ok || ph.PageID != pid || int(ph.FileID) != int(bh.FileID) {
					return damaged(int(bh.FileID), pid)
				}
			}
		}
		if targets != nil {
			t := targets[int(bh.FileID)]
			if t == nil {
				return damaged(int(bh.FileID), bh.PageID)
			}
			if _, err := t.f.WriteAt(pages, int64(bh.PageID)*PageSize); err != nil {
				return &backupErr{errs: []*tds.Error{errWriteFailed(t.file.Physical, osErrText(err))}}
			}
		}
		if sink != nil {
			if err := sink(bh, pages); err != nil {
				return err
			}
		}
		if seen[bh.Seq].Swap(true) {
			return damaged(int(bh.FileID), bh.PageID)
		}
		done.Add(int64(len(pages) / PageSize))
		pool.Put(b.payload[:cap(b.payload)])
	}
	return nil
}

// restoreDatabase plans the files (MOVE), creates the database in state
// RESTORING, writes every page, and brings it ONLINE.
func (x *execCtx) restoreDatabase(s *restoreStmt, op string, stripes []*stripe) error {
	// msdb.dbo.restorehistory.restore_date is the "Date and time of the start
	// of the restore operation" (https://learn.microsoft.com/en-us/sql/relational-databases/system-tables/restorehistory-transact-sql).
	began := x.in.serverTime(time.Now())
	h := stripes[0].hdr
	family := headerFamilyGUID(h)
	v, err := (&env{x: x}).eval(s.db)
	if err != nil {
		return err
	}
	name := toString(v)
	if name == "" {
		return sqlErr(102, 15, "Incorrect syntax near 'DATABASE'.")
	}
	if e := errIdentTooLong(name); e != nil { // a name from a variable
		return opError(op, e)
	}
	_, replace := s.opts["REPLACE"]
	// NORECOVERY: "Instructs the restore operation to not roll back any
	// uncommitted transactions"; the database stays RESTORING, ready for
	// more backups (RESTORE Statements - Arguments,
	// https://learn.microsoft.com/en-us/sql/t-sql/statements/restore-statements-arguments-transact-sql),
	// and msdb.dbo.restorehistory records the restore with recovery 0.
	_, noRecovery := s.opts["NORECOVERY"]
	_, standby := s.opts["STANDBY"]
	if h.Type == 2 {
		return opError(op, errNotSupported("RESTORE DATABASE from a log backup; use RESTORE LOG"))
	}
	if h.Type == 5 {
		return x.restoreDiff(s, op, stripes, began)
	}
	stop, err := x.stopTarget(s)
	if err != nil {
		return err
	}
	if stop.given && strings.EqualFold(h.RecoveryModel, "SIMPLE") {
		// 3145 (Database Engine events and errors 3000 to 3999).
		return opError(op, sqlErr(3145, 16, "The STOPAT option is not supported for databases that use the SIMPLE recovery model."))
	}
	if stop.given && stop.lsn == 0 {
		// STOPAT on RESTORE DATABASE only checks that the data backup is
		// not too recent for the target ("the complete data backup is
		// always restored", RESTORE Arguments): 4338, as captured for a
		// full backup ending after the STOPAT (gursethi.blogspot.com,
		// "RESTORE DATABASE WITH STOPAT"). The target is reached by a
		// RESTORE LOG, so the database stays RESTORING.
		if wallClock(stripes[0].trl.Finish).After(stop.at) {
			return opError(op, sqlErr(4338, 16, "The STOPAT clause specifies a point too early to allow this backup set to be restored. Choose a different stop point or use RESTORE DATABASE WITH RECOVERY to recover at the current point."))
		}
		noRecovery = true
	}
	if err := x.restoreRefusals(op, stripes); err != nil {
		return err
	}
	// MOVE targets by logical name.
	moves := map[string]string{}
	for _, m := range s.moves {
		lv, err := (&env{x: x}).eval(m.logical)
		if err != nil {
			return err
		}
		tv, err := (&env{x: x}).eval(m.to)
		if err != nil {
			return err
		}
		if e := errIdentTooLong(toString(lv)); e != nil { // logical names are sysname
			return opError(op, e)
		}
		found := false
		for _, f := range h.Files {
			if strings.EqualFold(f.Logical, toString(lv)) {
				found = true
			}
		}
		if !found {
			return opError(op, sqlErr(3234, 16, "Logical file '%s' is not part of database '%s'. Use RESTORE FILELISTONLY to list the logical file names.", toString(lv), name))
		}
		moves[strings.ToLower(toString(lv))] = toString(tv)
	}
	x.in.mu.Lock()
	existing := x.in.lookupDBLocked(name)
	if existing != nil && existing.system {
		x.in.mu.Unlock()
		return opError(op, errNotSupported("RESTORE of system database "+existing.Name))
	}
	// Without REPLACE, RESTORE refuses to overwrite a different database:
	// "If the database specified in a RESTORE statement already exists on
	// the current server and the specified database family GUID differs from
	// the database family GUID recorded in the backup set, the database is
	// not restored" (3154), and an online database in the full recovery model
	// (every emulated user database) needs its tail-log backed up first
	// (3159). https://learn.microsoft.com/en-us/previous-versions/sql/sql-server-2008-r2/ms191315(v=sql.105)
	// ("Using the REPLACE Option"). The name in the backup set does not
	// matter: a copy restored under another name keeps the family GUID.
	if existing != nil && !replace {
		if x.in.familyGUID(existing) != family {
			x.in.mu.Unlock()
			return opError(op, sqlErr(3154, 16, "The backup set holds a backup of a database other than the existing '%s' database.", existing.Name))
		}
		if existing.State != "RESTORING" && !existing.Standby {
			x.in.mu.Unlock()
			return opError(op, sqlErr(3159, 16, "The tail of the log for the database \"%s\" has not been backed up. Use BACKUP LOG WITH NORECOVERY to backup the log if it contains work you do not want to lose. Use the WITH REPLACE or WITH STOPAT clause of the RESTORE statement to just overwrite the contents of the log.", existing.Name))
		}
	}
	if existing != nil && x.in.dbInUseLocked(existing, x.s) || existing == nil && x.in.restoringLocked(name, x.s) {
		x.in.mu.Unlock()
		return opError(op, sqlErr(3101, 16, "Exclusive access could not be obtained because the database is in use."))
	}
	x.req.target = name
	x.in.mu.Unlock()
	defer func() {
		x.in.mu.Lock()
		x.req.target = ""
		x.in.mu.Unlock()
	}()
	// Plan the files.
	var plan []dbFile
	var planErrs []*tds.Error
	for _, f := range h.Files {
		phys := f.Physical
		if m, ok := moves[strings.ToLower(f.Logical)]; ok {
			phys = m
		}
		t, oserr := x.in.resolve(phys)
		if t.null || oserr != "" {
			if oserr == "" {
				oserr = osPathNotFound
			}
			if x.in.linux() {
				phys = linuxPath(phys)
			}
			planErrs = append(planErrs,
				sqlErr(5133, 16, "Directory lookup for the file \"%s\" failed with the operating system error %s.", phys, oserr),
				sqlErr(3156, 16, "File '%s' cannot be restored to '%s'. Use WITH MOVE to identify a valid location for the file.", f.Logical, phys))
			continue
		}
		if owner := x.in.fileOwner(t.local); owner != nil && owner != existing {
			planErrs = append(planErrs,
				sqlErr(1834, 16, "The file '%s' cannot be overwritten.  It is being used by database '%s'.", phys, owner.Name),
				sqlErr(3156, 16, "File '%s' cannot be restored to '%s'. Use WITH MOVE to identify a valid location for the file.", f.Logical, phys))
			continue
		}
		if _, err := os.Stat(t.local); err == nil && !replace && (existing == nil || x.in.fileOwner(t.local) != existing) {
			planErrs = append(planErrs,
				sqlErr(5170, 16, "Cannot create file '%s' because it already exists. Change the file path or the file name, and retry the operation.", phys),
				sqlErr(3156, 16, "File '%s' cannot be restored to '%s'. Use WITH MOVE to identify a valid location for the file.", f.Logical, phys))
			continue
		}
		for _, p := range plan {
			if strings.EqualFold(p.Path, t.local) {
				planErrs = append(planErrs, sqlErr(3176, 16, "File '%s' is claimed by '%s'(%d) and '%s'(%d). The WITH MOVE clause can be used to relocate one or more files.", phys, p.Logical, p.FileID, f.Logical, f.FileID))
			}
		}
		plan = append(plan, dbFile{FileID: f.FileID, Logical: f.Logical, Path: t.local, Physical: phys, Log: f.Log, Pages: f.Pages,
			Free: f.Free, Filestream: f.Filestream})
	}
	if len(planErrs) > 0 {
		planErrs = append(planErrs, sqlErr(3119, 16, "Problems were identified while planning for the RESTORE statement. Previous messages provide details."))
		return opError(op, planErrs...)
	}
	if err := x.restoreSpace(op, plan, existing); err != nil {
		return err
	}
	// The database exists from now on, RESTORING until the last page is in.
	owner := x.restoredOwner(existing) // takes in.mu itself for a new database
	x.in.mu.Lock()
	if existing != nil {
		if err := x.in.removeDatabaseLocked(existing); err != nil {
			x.in.mu.Unlock()
			return err
		}
	}
	if x.in.lookupDBLocked(name) != nil {
		x.in.mu.Unlock()
		return opError(op, sqlErr(3154, 16, "The backup set holds a backup of a database other than the existing '%s' database.", name))
	}
	if lag := x.in.faults.createLate; lag > 0 { // StampCreateLate
		x.in.faults.createLate = 0
		x.in.clockAhead.Add(int64(lag))
	}
	// A database RESTORE creates gets a free id; one it replaces keeps its
	// own.
	id := 0
	if existing != nil {
		id = existing.ID
	} else {
		id = x.in.newDatabaseIDLocked()
	}
	// RESTORE creates the database anew: sys.databases.create_date ("Date the
	// database was created or renamed",
	// https://learn.microsoft.com/en-us/sql/relational-databases/system-catalog-views/sys-databases-transact-sql)
	// is now, not the source's, and state_desc is RESTORING until the last
	// page is in (or for good, when the RESTORE is cut short).
	access := h.UserAccess
	if access == "" {
		access = "MULTI_USER"
	}
	nd := &database{ID: id, Name: name, Files: plan, Created: x.in.serverTime(time.Now()), UserAccess: access, State: "RESTORING",
		FamilyGUID: family, Owner: owner, TDEThumbprint: h.TDEThumbprint, Containment: h.Containment, LastGoodCheckDB: h.LastGoodCheckDB}
	if existing != nil {
		// The workload stands for the application, which writes to the
		// database by its name: a RESTORE over the database does not stop
		// it (it commits into the restored database once it is online),
		// so Start resumes it as before.
		nd.CommitRate = existing.CommitRate
	}
	x.in.cat.Databases = append(x.in.cat.Databases, nd)
	serr := x.in.saveCatalog()
	x.in.mu.Unlock()
	if serr != nil {
		return serr
	}
	// sys.dm_exec_requests.database_id is "ID of the database the request
	// is executing against" (https://learn.microsoft.com/en-us/sql/relational-databases/system-dynamic-management-views/sys-dm-exec-requests-transact-sql):
	// for a RESTORE the session's database, not documented as the target.
	x.setCommand("RESTORE DATABASE", x.currentDB().ID, true)
	start := time.Now()
	targets := map[int]*restoreTarget{}
	defer func() {
		for _, t := range targets {
			t.f.Close()
		}
	}()
	for _, f := range plan {
		if !x.in.takeSpace(f) {
			// The space checked above went to someone else meanwhile (another
			// RESTORE): creating the file fails with operating system error
			// 112, 3634 "The operating system returned the error '%ls' while
			// attempting '%ls' on '%ls'." (same page as 3257).
			return opError(op, sqlErr(3634, 16, "The operating system returned the error '%s' while attempting 'RestoreContainer::ValidateTargetForCreation' on '%s'.", osDiskFull, f.Physical))
		}
		fh, err := os.OpenFile(f.Path, os.O_CREATE|os.O_TRUNC|os.O_RDWR, 0o644)
		if err != nil {
			return opError(op, sqlErr(5123, 16, "CREATE FILE encountered operating system error %s while attempting to open or create the physical file '%s'.", osErrText(err), f.Physical))
		}
		if err := fh.Truncate(f.bytes()); err != nil {
			fh.Close()
			return opError(op, sqlErr(5123, 16, "CREATE FILE encountered operating system error %s while attempting to open or create the physical file '%s'.", osErrText(err), f.Physical))
		}
		targets[f.FileID] = &restoreTarget{file: f, f: fh}
	}
	initBytes, logBytes := restorePhaseBytes(plan, x.in.instantFileInit())
	if err := x.silentPhase(initBytes); err != nil {
		return err
	}
	if err := x.restoreData(s, op, stripes, targets, nil); err != nil {
		return err
	}
	if h.TDECompressedFormat && !x.in.readsTDECompressedFormat() {
		// The data is in; reading the log fails (KB5014298): the copy
		// stays RESTORING.
		return errTDEFormat(op, name)
	}
	if err := x.silentPhase(logBytes); err != nil {
		return err
	}
	if x.isCrashed() { // crashed at 100 %: the database stays RESTORING
		return tds.ErrKillConnection
	}
	for _, t := range targets {
		// SQL Server writes data and log files with FILE_FLAG_WRITE_THROUGH
		// (https://learn.microsoft.com/en-us/troubleshoot/sql/admin/logging-data-storage-algorithms):
		// a restored copy is on stable storage when RESTORE returns.
		if err := t.f.Sync(); err != nil {
			return opError(op, errWriteFailed(t.file.Physical, osErrText(err)))
		}
		if err := t.f.Close(); err != nil {
			return opError(op, errWriteFailed(t.file.Physical, osErrText(err)))
		}
	}
	targets = nil
	readOnly := false
	if err := x.in.updateMetadata(nd, func(md *metadata) error {
		restoreBroker(md, s.opts)
		readOnly = md.ReadOnly
		return nil
	}); err != nil {
		return err
	}
	// Online: record it in msdb.
	finish := time.Now()
	var total int64
	for _, f := range plan {
		x.info(4035, 0, fmt.Sprintf("Processed %d pages for database '%s', file '%s' on file 1.", f.Pages, name, f.Logical))
		total += f.Pages
	}
	// The full backup's redo part brings the copy to the set's LastLSN.
	if err := x.in.applyLogRecs(nd, stripes[0].trl.Redo); err != nil {
		return opError(op, errWriteFailed(nd.Files[0].Physical, osErrText(err)))
	}
	undo := ""
	if standby {
		if undo, err = x.standbyFile(op, s); err != nil {
			return err
		}
	}
	x.in.mu.Lock()
	nd.ReadOnly = readOnly
	last := setLastLSN(h, stripes[0].trl)
	nd.RecoveryModel, _ = checkRecoveryModel(h.RecoveryModel)
	nd.EndLSN, nd.RedoLSN, nd.RedoTime, nd.RedoFork = last, last, wallClock(stripes[0].trl.Finish), headerForks(h).Last
	nd.CheckpointLSN, nd.FullCheckpointLSN = h.CheckpointLSN, h.CheckpointLSN
	if !h.CopyOnly {
		// The restored full is the base a differential continues
		// (differential.go); a COPY_ONLY full is none.
		nd.DiffBaseGUID, nd.DiffBaseLSN = h.BackupSetGUID, h.CheckpointLSN
	}
	x.in.endStateLocked(nd, !noRecovery && !standby, undo)
	setID := x.in.backupSetIDLocked(stripes[0])
	x.in.cat.RestoreHistory = append(x.in.cat.RestoreHistory, restoreHistoryRow{ID: x.in.cat.NextRestoreID, Date: began,
		Database: name, User: x.s.login.User, BackupSetID: setID, Type: "D", Replace: replace, Recovery: !noRecovery && !standby})
	x.in.cat.NextRestoreID++
	serr = x.in.saveCatalog()
	x.in.mu.Unlock()
	if serr != nil {
		x.in.log.Error("save catalog", zap.Error(serr))
	}
	secs := max(finish.Sub(start).Seconds(), 0.001)
	x.info(3014, 0, fmt.Sprintf("RESTORE DATABASE successfully processed %d pages in %.3f seconds (%.3f MB/sec).",
		total, secs, float64(total*PageSize)/(1<<20)/secs))
	return nil
}

// fileOwner returns the database using a local file, if any.
func (in *Instance) fileOwner(local string) *database {
	in.mu.Lock()
	defer in.mu.Unlock()
	for _, d := range in.cat.Databases {
		for _, f := range d.Files {
			if strings.EqualFold(filepath.Clean(f.Path), filepath.Clean(local)) {
				return d
			}
		}
	}
	return nil
}

// restoreBroker sets Service Broker's state of a restored database
// ("RESTORE Statements - Arguments", service_broker_WITH options,
// https://learn.microsoft.com/en-us/sql/t-sql/statements/restore-statements-arguments-transact-sql):
// by default message delivery is disabled and the database keeps its
// Service Broker identifier; ENABLE_BROKER and ERROR_BROKER_CONVERSATIONS
// keep the identifier and enable delivery; NEW_BROKER gives a new
// identifier (its conversations are removed without end-dialog messages)
// and the broker is enabled, delivering nothing of the source's.
func restoreBroker(md *metadata, opts map[string]expr) {
	_, enable := opts["ENABLE_BROKER"]
	_, errorConv := opts["ERROR_BROKER_CONVERSATIONS"]
	_, renew := opts["NEW_BROKER"]
	md.BrokerEnabled = enable || errorConv || renew
	if renew {
		md.BrokerGUID = newGUID()
	}
}
