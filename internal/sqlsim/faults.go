package sqlsim

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/backupcycle/backupcycle/internal/sqlsim/tds"
)

// Fault injection for tests and the demo: crashes at a chosen point,
// damaged pages and stripes, slow and full or unreachable shares.

type faultState struct {
	unreachable map[string]bool
	netErr      map[string]string // share prefix -> OS error text of its flaky network
	quota       map[string]int64
	fileLimit   map[string]int64 // share prefix -> size a file there cannot grow past (SetShareFileLimit)
	shareLimit  map[string]*limiter
	streamRate  int64
	instantInit bool               // data files need no zeroing (SetInstantFileInit)
	crashAt     map[string]float64 // op -> percent, one-shot
	dropAt      map[string]float64 // op -> percent, one-shot: drop the connection running it
	refuse      int                // connection attempts still to refuse
	lost        int                // DropConnectionAt faults fired
	tempdbFull  bool               // DBCC CHECKDB cannot get its tempdb space (SetTempdbFull)
	// checkDBHold holds a DBCC CHECKDB in a phase (HoldCheckDB), until the
	// channel is closed.
	checkDBHold map[string]chan struct{}
	// checkDBError is the error the next DBCC CHECKDB raises
	// (CheckDBError), 0 for none.
	checkDBError int32
	dataRead     map[string]int // "db\x00fileID" -> OS error reading it (SetDataFileReadError)
	queries      map[string]*tds.Error
	// createLate is how long after its start the next RESTORE DATABASE
	// creates its database (StampCreateLate), one-shot.
	createLate time.Duration
	// crashOn is the batch text whose crashOnLeft-th arrival crashes the
	// instance (CrashOnQuery), one-shot; "" for none.
	crashOn     string
	crashOnLeft int
}

func (f *faultState) init() {
	f.unreachable = map[string]bool{}
	f.netErr = map[string]string{}
	f.quota = map[string]int64{}
	f.fileLimit = map[string]int64{}
	f.shareLimit = map[string]*limiter{}
	f.crashAt = map[string]float64{}
	f.dropAt = map[string]float64{}
	f.checkDBHold = map[string]chan struct{}{}
	f.dataRead = map[string]int{}
	f.queries = map[string]*tds.Error{}
}

// Operations CrashAt understands.
const (
	OpBackup  = "BACKUP"
	OpRestore = "RESTORE"
	OpCheckDB = "DBCC"
)

// CrashAt arms a one-shot crash: when the next operation op (OpBackup,
// OpRestore, OpCheckDB) reaches percent, the instance crashes as by Crash.
func (in *Instance) CrashAt(op string, percent float64) error {
	op, err := checkArm("CrashAt", op, percent)
	if err != nil {
		return err
	}
	in.mu.Lock()
	in.faults.crashAt[op] = percent
	in.mu.Unlock()
	return nil
}

// DropConnectionAt arms a one-shot lost connection: when the next operation
// op (OpBackup, OpRestore, OpCheckDB) reaches percent, the connection
// running it is closed without a reply, as a network failure between the
// client and the server would; the instance keeps running and accepts new
// connections. The statement follows the rule of a vanished client (see
// client.go): it runs on, visible in sys.dm_exec_requests, until its next
// write to the client. With STATS that is its next progress message, where
// it stops as SQL Server stops it (stripes without a trailer, a RESTORING
// database; Statements records Outcome "dropped"); without, it completes
// and only its reply is lost. LostConnections counts the fired faults.
func (in *Instance) DropConnectionAt(op string, percent float64) error {
	op, err := checkArm("DropConnectionAt", op, percent)
	if err != nil {
		return err
	}
	in.mu.Lock()
	in.faults.dropAt[op] = percent
	in.mu.Unlock()
	return nil
}

// Disarm removes armed CrashAt and DropConnectionAt faults for op that have
// not fired (all operations for ""), e.g. when a simulation step ends
// before the operation ran.
func (in *Instance) Disarm(op string) {
	op = strings.ToUpper(op)
	in.mu.Lock()
	defer in.mu.Unlock()
	for _, m := range []map[string]float64{in.faults.crashAt, in.faults.dropAt} {
		for k := range m {
			if op == "" || k == op {
				delete(m, k)
			}
		}
	}
}

func checkArm(fn, op string, percent float64) (string, error) {
	op = strings.ToUpper(op)
	switch op {
	case OpBackup, OpRestore, OpCheckDB:
	default:
		return "", fmt.Errorf("sqlsim: %s: unknown operation %q; use %q, %q or %q", fn, op, OpBackup, OpRestore, OpCheckDB)
	}
	if percent < 0 || percent > 100 {
		return "", fmt.Errorf("sqlsim: %s: percent %v must be between 0 and 100", fn, percent)
	}
	return op, nil
}

// crashDue reports (and disarms) an armed crash for op at percent p.
func (in *Instance) crashDue(op string, p float64) bool {
	return in.armedDue(in.faults.crashAt, op, p)
}

// dropDue reports (and disarms) an armed lost connection for op at p.
func (in *Instance) dropDue(op string, p float64) bool {
	return in.armedDue(in.faults.dropAt, op, p)
}

func (in *Instance) armedDue(armed map[string]float64, op string, p float64) bool {
	in.mu.Lock()
	defer in.mu.Unlock()
	at, ok := armed[op]
	if !ok || p < at {
		return false
	}
	delete(armed, op)
	return true
}

// DropConnections closes every open connection now, without a reply, and
// keeps serving: what clients see when the network between them and a
// running server fails for a moment. Running statements follow the rule of
// a vanished client (see client.go and DropConnectionAt): a network failure
// stops nothing on the server by itself; Crash and Stop do.
func (in *Instance) DropConnections() {
	in.mu.Lock()
	srv := in.srv
	running := in.running
	in.mu.Unlock()
	if srv != nil && running {
		srv.DropConnections()
	}
}

// LostConnections is how many armed DropConnectionAt faults have fired.
func (in *Instance) LostConnections() int {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.faults.lost
}

// SetTempdbFull makes tempdb out of space: DBCC CHECKDB stops before it
// checks anything, with 1105 (could not allocate space in tempdb, its
// PRIMARY filegroup full) then 8921 "Check terminated. A failure was
// detected while collecting facts. Possibly tempdb out of space or a system
// table is inconsistent." — as SQL Server does when the facts CHECKDB
// sorts in tempdb do not fit
// (https://learn.microsoft.com/en-us/sql/relational-databases/errors-events/mssqlserver-8921-database-engine-error).
func (in *Instance) SetTempdbFull(full bool) {
	in.mu.Lock()
	in.faults.tempdbFull = full
	in.mu.Unlock()
}

// SetDataFileReadError makes reading data file fileID of database db fail
// with the Windows error code: 23 ERROR_CRC ("Data error (cyclic
// redundancy check)", the disk returned damaged data) or 1117
// ERROR_IO_DEVICE. A BACKUP of db then fails with 3203 "Read on
// "<file>" failed: 23(...)" + 3013, as SQL Server reports a read error of
// the database's own file (its path, not a backup device's). 0 clears it.
// See https://learn.microsoft.com/en-us/windows/win32/debug/system-error-codes--0-499-.
func (in *Instance) SetDataFileReadError(db string, fileID, code int) error {
	if code != 0 && code != 23 && code != 1117 {
		return fmt.Errorf("sqlsim: SetDataFileReadError: code %d, want 23 (CRC), 1117 (I/O device) or 0", code)
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	key := strings.ToLower(db) + "\x00" + strconv.Itoa(fileID)
	if code == 0 {
		delete(in.faults.dataRead, key)
	} else {
		in.faults.dataRead[key] = code
	}
	return nil
}

// dataReadError is the OS error text of an armed SetDataFileReadError.
func (in *Instance) dataReadError(db string, fileID int) (string, bool) {
	in.mu.Lock()
	defer in.mu.Unlock()
	switch in.faults.dataRead[strings.ToLower(db)+"\x00"+strconv.Itoa(fileID)] {
	case 23:
		return "23(Data error (cyclic redundancy check).)", true
	case 1117:
		return "1117(The request could not be performed because of an I/O device error.)", true
	}
	return "", false
}

// FailQueries makes every batch whose text contains match fail, before
// anything of it runs, with SQL Server error number (class, message): the
// answer of an instance whose state the emulator does not model, such as
// 6263 "Execution of user code in the .NET Framework is disabled. Enable
// "clr enabled" configuration option." for a query calling a CLR function
// where CLR integration is off. An empty message clears it.
func (in *Instance) FailQueries(match string, number int32, class uint8, message string) {
	in.mu.Lock()
	defer in.mu.Unlock()
	if message == "" {
		delete(in.faults.queries, match)
		return
	}
	in.faults.queries[match] = &tds.Error{Number: number, State: 1, Class: class, Message: message, Line: 1}
}

// queryFault is the armed FailQueries error for a batch, nil when none.
func (in *Instance) queryFault(sql string) *tds.Error {
	in.mu.Lock()
	defer in.mu.Unlock()
	for m, e := range in.faults.queries {
		if strings.Contains(sql, m) {
			c := *e
			return &c
		}
	}
	return nil
}

func (in *Instance) isTempdbFull() bool {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.faults.tempdbFull
}

// RefuseConnections makes the next n connection attempts fail: the server
// closes each without a reply during login, as a briefly unreachable host
// or a reset network path would (the client sees a connection error, not a
// SQL error). Open connections are not affected; 0 clears it.
func (in *Instance) RefuseConnections(n int) {
	in.mu.Lock()
	in.faults.refuse = max(n, 0)
	in.mu.Unlock()
}

// refuseDue reports (and counts down) a connection attempt to refuse.
func (in *Instance) refuseDue() bool {
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.faults.refuse <= 0 {
		return false
	}
	in.faults.refuse--
	return true
}

// kill runs KILL session_id: the session's connection is closed and its
// running request ends where it is, as SQL Server ends a killed session
// (https://learn.microsoft.com/en-us/sql/t-sql/language-elements/kill-transact-sql).
// 6104 for the own session, 6106 for one that does not exist.
func (x *execCtx) kill(n *killStmt) error {
	if err := x.mayKill(); err != nil {
		return err
	}
	v, err := (&env{x: x}).eval(n.spid)
	if err != nil {
		return err
	}
	id, ok := normValue(v).(int64)
	if !ok {
		return sqlErr(6112, 16, "Process ID %s is not a valid process ID. Choose a number between 1 and 2048.", toString(v))
	}
	if id == int64(x.s.id) {
		return sqlErr(6104, 16, "Cannot use KILL to kill your own process.")
	}
	if id <= 0 || id > 32767 {
		return sqlErr(6106, 16, "Process ID %d is not an active process ID.", id)
	}
	x.in.mu.Lock()
	_, exists := x.in.sessions[uint16(id)]
	srv := x.in.srv
	if exists {
		for r := range x.in.requests {
			if r.sessionID == int(id) {
				r.killed.Store(true)
				r.cancel()
			}
		}
	}
	x.in.mu.Unlock()
	if !exists {
		return sqlErr(6106, 16, "Process ID %d is not an active process ID.", id)
	}
	if srv != nil {
		srv.DropConnection(uint16(id))
	}
	return nil
}

// dropConnection closes the connection of the session running x (see
// DropConnectionAt); the statement itself runs on until its next write.
func (x *execCtx) dropConnection() {
	x.in.mu.Lock()
	srv := x.in.srv
	x.in.faults.lost++
	x.in.mu.Unlock()
	x.in.log.Warn("closing the connection of a running statement (fault injection)", zap.Int("spid", int(x.s.id)))
	if srv != nil {
		srv.DropConnection(x.s.id)
	}
}

// crashNow marks the instance crashed at once (in-flight work sees it on
// its next step) and finishes the crash in the background, since the
// caller is itself an operation Crash waits for.
func (in *Instance) crashNow() {
	srv := in.markCrashed("sqlsim crashed at the armed point (fault injection)")
	if srv == nil {
		return
	}
	go func() {
		srv.DropConnections()
		srv.Close()
	}()
}

// SetThrottle limits every backup/restore stream (one stripe file) to
// bytesPerSec; 0 removes the limit.
func (in *Instance) SetThrottle(bytesPerSec int64) {
	in.mu.Lock()
	in.faults.streamRate = bytesPerSec
	in.mu.Unlock()
}

// SetInstantFileInit tells whether the instance has instant file
// initialization for data files (the service account holds "Perform volume
// maintenance tasks"): then a RESTORE zeroes only the log before copying
// data, else every file (see restorePhaseBytes). Off by default.
func (in *Instance) SetInstantFileInit(on bool) {
	in.mu.Lock()
	in.faults.instantInit = on
	in.mu.Unlock()
}

func (in *Instance) instantFileInit() bool {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.faults.instantInit
}

// SetShareThrottle limits the total bytes/s of all streams to one share
// (its NIC); 0 removes the limit.
func (in *Instance) SetShareThrottle(prefix string, bytesPerSec int64) {
	in.mu.Lock()
	defer in.mu.Unlock()
	p := normPrefix(prefix)
	l := in.faults.shareLimit[p]
	if l == nil {
		l = &limiter{}
		in.faults.shareLimit[p] = l
	}
	l.setRate(bytesPerSec)
}

// SetShareUnreachable makes paths under prefix fail like an unreachable
// host: opening a backup file there fails with 3201, operating system error
// 53; a BACKUP or RESTORE that already has a file open there fails at its
// next write (3202) or read (3203) with operating system error 64(The
// specified network name is no longer available.), as when the file server
// goes away in the middle of the transfer.
func (in *Instance) SetShareUnreachable(prefix string, unreachable bool) {
	in.mu.Lock()
	in.faults.unreachable[normPrefix(prefix)] = unreachable
	in.mu.Unlock()
}

// SetShareNetworkError makes every open, read and write of a backup file
// under prefix fail with Windows error code: 59 (An unexpected network
// error occurred.) or 64 (The specified network name is no longer
// available.) — 3201 on open, 3202 on a BACKUP write, 3203 on a RESTORE
// read — until it is set to 0.
func (in *Instance) SetShareNetworkError(prefix string, code int) error {
	text := ""
	switch code {
	case 0:
	case 59:
		text = osNetUnexpected
	case 64:
		text = osNetNameGone
	default:
		return fmt.Errorf("sqlsim: SetShareNetworkError: error code %d is not emulated; use 59, 64 or 0", code)
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	if text == "" {
		delete(in.faults.netErr, normPrefix(prefix))
	} else {
		in.faults.netErr[normPrefix(prefix)] = text
	}
	return nil
}

// shareNetErr returns a check of the share's network, for an open backup
// file: the OS error text a read or write would fail with now, "" when the
// share is there.
func (in *Instance) shareNetErr(s *shareMap) func() string {
	if s == nil {
		return func() string { return "" }
	}
	return func() string {
		in.mu.Lock()
		defer in.mu.Unlock()
		if t := in.faults.netErr[s.prefix]; t != "" {
			return t
		}
		if in.faults.unreachable[s.prefix] {
			return osNetNameGone
		}
		return ""
	}
}

// SetShareFileLimit makes a file under prefix unable to grow past bytes: a
// BACKUP write beyond fails with 3202 "Write on ... failed: 665(The
// requested operation could not be completed due to a file system
// limitation)", as NTFS answers when a heavily fragmented file's attribute
// list is full ("A heavily fragmented file in an NTFS volume may not grow
// beyond a certain size", https://learn.microsoft.com/en-us/troubleshoot/windows-server/backup-and-storage/fragmented-file-in-ntfs-volume-not-grow).
// 0 removes it.
func (in *Instance) SetShareFileLimit(prefix string, bytes int64) {
	in.setShareLimit(in.faults.fileLimit, prefix, bytes)
}

// setShareLimit sets (bytes > 0) or removes a share's entry in m.
func (in *Instance) setShareLimit(m map[string]int64, prefix string, bytes int64) {
	in.mu.Lock()
	defer in.mu.Unlock()
	if bytes <= 0 {
		delete(m, normPrefix(prefix))
	} else {
		m[normPrefix(prefix)] = bytes
	}
}

// SetShareQuota caps the bytes the share's directory may hold: a volume
// of that size. A BACKUP that would exceed it fails with 3202 "...
// 112(There is not enough space on the disk.)", a RESTORE into it with
// 3257 (see restoreSpace); sys.dm_os_volume_stats reports it. 0 removes
// the cap.
func (in *Instance) SetShareQuota(prefix string, bytes int64) {
	in.setShareLimit(in.faults.quota, prefix, bytes)
}

// CorruptPage flips one byte in the body of page (fileID:pageID) of a
// database, so its checksum no longer matches (CHECKDB reports it, BACKUP
// WITH CHECKSUM refuses it).
func (in *Instance) CorruptPage(db string, fileID int, pageID uint32) error {
	d := in.lookupDB(db)
	if d == nil || d.system {
		return fmt.Errorf("sqlsim: CorruptPage: database %q not found on %s", db, in.cfg.Name)
	}
	for _, f := range d.Files {
		if f.FileID == fileID {
			if int64(pageID) >= f.Pages {
				return fmt.Errorf("sqlsim: CorruptPage: file %d of %q has %d pages, page %d does not exist", fileID, db, f.Pages, pageID)
			}
			return FlipByte(f.Path, int64(pageID)*PageSize+pageHeaderSize+1234)
		}
	}
	return fmt.Errorf("sqlsim: CorruptPage: database %q has no file id %d", db, fileID)
}

// FlipByte inverts the bits of the byte at offset in a local file (a
// stripe or a database file).
func FlipByte(path string, offset int64) error {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("sqlsim: flip byte: %w", err)
	}
	defer f.Close()
	b := make([]byte, 1)
	if _, err := f.ReadAt(b, offset); err != nil {
		return fmt.Errorf("sqlsim: flip byte at %d of %s: %w", offset, path, err)
	}
	b[0] ^= 0xFF
	if _, err := f.WriteAt(b, offset); err != nil {
		return fmt.Errorf("sqlsim: flip byte at %d of %s: %w", offset, path, err)
	}
	return nil
}
