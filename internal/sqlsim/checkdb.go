package sqlsim

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/backupcycle/backupcycle/internal/sqlsim/tds"
)

// DBCC CHECKDB reads every page of every file and checks its checksum, its
// header (page id, file id) and, for data pages, that the owning table is
// the one the metadata allocates the page to; then it checks the metadata
// itself (extents inside the files, row counts not negative).

const maxErrorsPerObject = 200 // without ALL_ERRORMSGS

func partitionID(obj uint32) int64 { return 72057594037927936 + int64(obj)*65536 }

type dbccErrors struct {
	all      bool
	byObject map[uint32][]*tds.Error
	tables   map[uint32]string
}

func (c *dbccErrors) add(obj uint32, e *tds.Error) {
	if !c.all && len(c.byObject[obj]) >= maxErrorsPerObject {
		return
	}
	c.byObject[obj] = append(c.byObject[obj], e)
}

func pageErrors(obj uint32, fileID int, page int64, test string, v1, v2 int64) []*tds.Error {
	pid := partitionID(obj)
	return []*tds.Error{
		sqlErr(8928, 16, "Object ID %d, index ID 1, partition ID %d, alloc unit ID %d (type In-row data): Page (%d:%d) could not be processed.  See other errors for details.", obj, pid, pid, fileID, page),
		sqlErr(8939, 16, "Table error: Object ID %d, index ID 1, partition ID %d, alloc unit ID %d (type In-row data), page (%d:%d). Test (%s) failed. Values are %d and %d.", obj, pid, pid, fileID, page, test, v1, v2),
	}
}

func (x *execCtx) checkDB(s *dbccStmt) error {
	if e := dbccOptionConflict(s.opts); e != nil {
		return e
	}
	dbName := x.s.Database()
	if s.db != nil {
		v, err := (&env{x: x}).eval(s.db)
		if err != nil {
			return err
		}
		dbName = toString(v)
	}
	d := x.in.lookupDB(dbName)
	if d == nil {
		return sqlErr(2520, 16, "Could not find database '%s'. The database either does not exist, or was dropped before a statement tried to use it. Verify if the database exists by querying the sys.databases catalog view.", dbName)
	}
	if x.in.restoring(d) {
		return errRestoring(d.Name)
	}
	if err := x.mayCheckDB(d); err != nil {
		return err
	}
	noInfo, all := false, false
	for _, o := range s.opts {
		switch o {
		case "NO_INFOMSGS":
			noInfo = true
		case "ALL_ERRORMSGS":
			all = true
		}
	}
	if d.system {
		if !noInfo {
			return x.dbccClean(d.Name)
		}
		return nil
	}
	x.in.ops.Add(1)
	defer x.in.ops.Done()
	x.setCommand(PhaseAllocCheck, d.ID, true)
	if x.in.isTempdbFull() { // see SetTempdbFull
		return tds.Errors{
			sqlErr(1105, 17, "Could not allocate space for object 'dbo.SORT temporary run storage:  140737488355328' in database 'tempdb' because the 'PRIMARY' filegroup is full. Create disk space by deleting unneeded files, dropping objects in the filegroup, adding additional files to the filegroup, or setting autogrowth on for existing files in the filegroup."),
			sqlErr(8921, 16, "Check terminated. A failure was detected while collecting facts. Possibly tempdb out of space or a system table is inconsistent. Check previous errors."),
		}
	}
	// The system table pre-checks come first; a failure there ends the
	// CHECKDB at once (see CheckDBError).
	if n := x.in.checkDBErrorDue(PhaseAllocCheck); n != 0 {
		return preCheckError(n)
	}
	if err := x.checkDBPhase(PhaseAllocCheck, d.ID); err != nil {
		return err
	}
	if err := x.checkDBPhase(PhaseSysCheck, d.ID); err != nil {
		return err
	}
	if n := x.in.checkDBErrorDue(PhaseSysCheck); n != 0 {
		return schemaCorruption()
	}
	if err := x.checkDBPhase(PhaseTableCheck, d.ID); err != nil {
		return err
	}
	ce := &dbccErrors{all: all, byObject: map[uint32][]*tds.Error{}, tables: map[uint32]string{}}
	x.in.metaMu.RLock()
	md, mdErr := readBoot(d.Files[0].Path)
	x.in.metaMu.RUnlock()
	if mdErr != nil {
		md = &metadata{}
	}
	for _, t := range md.Tables {
		ce.tables[t.ObjectID] = t.Schema + "." + t.Name
	}
	owners := map[int][]extentOwner{}
	for _, t := range md.Tables {
		for _, e := range t.Extents {
			owners[e.FileID] = append(owners[e.FileID], extentOwner{e, t.ObjectID})
		}
	}
	var total int64
	for _, f := range d.Files {
		total += f.Pages
	}
	ctx, cancel := context.WithCancel(x.ctx)
	defer cancel()
	var done atomic.Int64
	var firstErr error
	var once sync.Once
	fail := func(err error) { once.Do(func() { firstErr = err; cancel() }) }
	var mu sync.Mutex
	x.in.mu.Lock()
	lim := &limiter{rate: x.in.faults.streamRate} // SetThrottle also slows the reads of CHECKDB
	x.in.mu.Unlock()
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		for _, f := range d.Files {
			if err := checkFile(ctx, f, owners[f.FileID], lim, &x.in.metaMu, &done, func(obj uint32, errs ...*tds.Error) {
				mu.Lock()
				for _, e := range errs {
					ce.add(obj, e)
				}
				mu.Unlock()
			}); err != nil {
				fail(err)
				return
			}
		}
	}()
	if err := x.watchProgress(ctx, OpCheckDB, finished, &done, total, 0, &firstErr, fail); err != nil {
		if x.isCrashed() {
			return tds.ErrKillConnection
		}
		return err
	}
	if n := x.in.checkDBErrorDue(PhaseTableCheck); n != 0 {
		obj, fileID, page := uint32(0), primaryFileID, int64(bootPages+1)
		if len(md.Tables) > 0 {
			obj = md.Tables[0].ObjectID
			if ex := md.Tables[0].Extents; len(ex) > 0 {
				fileID, page = ex[0].FileID, int64(ex[0].First)
			}
		}
		ce.add(obj, recordCheckError(obj, fileID, page))
	}
	for _, phase := range []string{PhaseSSBCheck, PhaseCheckCatalog} {
		if err := x.checkDBPhase(phase, d.ID); err != nil {
			return err
		}
	}
	// Metadata checks (CHECKCATALOG).
	if mdErr != nil {
		ce.add(0, sqlErr(8939, 16, "Table error: Object ID 0, index ID -1, partition ID 0, alloc unit ID 0 (type Unknown), page (1:1). Test (metadata readable) failed. Values are 0 and 1."))
	}
	for _, t := range md.Tables {
		if t.RowCount < 0 {
			ce.add(t.ObjectID, sqlErr(8945, 16, "Table error: Object ID %d, index ID 1 will be rebuilt.", t.ObjectID))
		}
		for _, e := range t.Extents {
			ok := false
			for _, f := range d.Files {
				if f.FileID == e.FileID && int64(e.First)+int64(e.Count) <= f.Pages {
					ok = true
				}
			}
			if !ok {
				ce.add(t.ObjectID, sqlErr(8905, 16, "Extent (%d:%d) in database ID %d is marked allocated in the GAM, but no SGAM or IAM has allocated it.", e.FileID, e.First, d.ID))
			}
		}
	}
	if err := x.checkDBPhase(PhaseIViewCheck, d.ID); err != nil {
		return err
	}
	var errs tds.Errors
	objs := make([]uint32, 0, len(ce.byObject))
	for o := range ce.byObject {
		objs = append(objs, o)
	}
	sort.Slice(objs, func(i, j int) bool { return objs[i] < objs[j] })
	consistency := 0
	for _, o := range objs {
		list := ce.byObject[o]
		errs = append(errs, list...)
		consistency += len(list)
		if !noInfo {
			name := ce.tables[o]
			if name == "" {
				name = "sys.sysallocunits"
			}
			x.info(8990, 10, fmt.Sprintf("CHECKDB found 0 allocation errors and %d consistency errors in table '%s' (object ID %d).", len(list), name, o))
		}
	}
	if len(errs) == 0 {
		x.in.mu.Lock()
		d.LastGoodCheckDB = x.in.wallText(time.Now())
		err := x.in.saveCatalog()
		x.in.mu.Unlock()
		if err != nil {
			return err
		}
		if !noInfo {
			return x.dbccClean(d.Name)
		}
		return nil
	}
	errs = append(errs, sqlErr(8989, 16, "CHECKDB found 0 allocation errors and %d consistency errors in database '%s'.", consistency, d.Name))
	if !noInfo {
		x.info(8958, 10, fmt.Sprintf("repair_allow_data_loss is the minimum repair level for the errors found by DBCC CHECKDB (%s).", d.Name))
	}
	return errs
}

func (x *execCtx) dbccClean(name string) error {
	x.info(8989, 0, fmt.Sprintf("CHECKDB found 0 allocation errors and 0 consistency errors in database '%s'.", name))
	x.info(2528, 0, "DBCC execution completed. If DBCC printed error messages, contact your system administrator.")
	return nil
}

type extentOwner struct {
	e   extentDef
	obj uint32
}

func ownerIn(list []extentOwner, page uint32) uint32 {
	for _, o := range list {
		if page >= o.e.First && page < o.e.First+o.e.Count {
			return o.obj
		}
	}
	return 0
}

// checkFile verifies every page of one database file.
func checkFile(ctx context.Context, f dbFile, owners []extentOwner, lim *limiter, meta *sync.RWMutex, done *atomic.Int64, report func(uint32, ...*tds.Error)) error {
	fh, err := os.Open(f.Path)
	if err != nil {
		return sqlErr(5120, 16, "Unable to open the physical file \"%s\". Operating system error %s.", f.Physical, osErrText(err))
	}
	defer fh.Close()
	const chunk = 128
	buf := make([]byte, chunk*PageSize)
	for start := int64(0); start < f.Pages; start += chunk {
		if err := ctx.Err(); err != nil {
			return err
		}
		n := min(chunk, f.Pages-start)
		b := buf[:n*PageSize]
		if err := lim.wait(ctx, len(b)); err != nil {
			return err
		}
		boot := f.FileID == primaryFileID && start <= bootPages // the chunk holds the metadata pages
		if boot {
			meta.RLock()
		}
		_, err := fh.ReadAt(b, start*PageSize)
		if boot {
			meta.RUnlock()
		}
		if err != nil && !errors.Is(err, io.EOF) {
			return sqlErr(823, 24, "The operating system returned error %s to SQL Server during a read at offset %#016x in file '%s'.", osErrText(err), start*PageSize, f.Physical)
		}
		for i := int64(0); i < n; i++ {
			p := b[i*PageSize : (i+1)*PageSize]
			pid := start + i
			owner := ownerIn(owners, uint32(pid))
			ok, _, _ := pageOK(p)
			ph := readPageHeader(p)
			switch {
			case !ok:
				report(owner, pageErrors(owner, f.FileID, pid, "IS_OFF (BUF_IOERR, pBUF->bstat)", 2057, -4)...)
			case int64(ph.PageID) != pid || int(ph.FileID) != f.FileID:
				report(owner, pageErrors(owner, f.FileID, pid, "PageId in the page header = (file:page) expected", int64(ph.FileID)<<32|int64(ph.PageID), int64(f.FileID)<<32|pid)...)
			case ph.Type == pageData && ph.ObjectID != owner:
				report(owner, pageErrors(owner, f.FileID, pid, "m_objId == objId", int64(ph.ObjectID), int64(owner))...)
			}
		}
		done.Add(n)
	}
	return nil
}

func errRestoring(name string) *tds.Error {
	return sqlErr(927, 14, "Database '%s' cannot be opened. It is in the middle of a restore.", name)
}
