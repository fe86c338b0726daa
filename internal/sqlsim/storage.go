package sqlsim

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Database files are made of 8 KiB pages like SQL Server's. Every page
// starts with a 96-byte header; the checksum covers the whole page except
// the checksum field itself, so one flipped bit anywhere is detected.
//
//	off  0  magic "SQPG"
//	off  4  page id (uint32, LE)
//	off  8  file id (uint16)
//	off 10  page type (uint16): pageFileHeader, pageBoot, pageData, pageLog
//	off 12  object id (uint32): the table owning a data page
//	off 16  LSN (uint64)
//	off 24  checksum (CRC-32C)
//	off 96  body
const (
	PageSize       = 8192
	pageHeaderSize = 96
	bootPages      = 8 // pages 1..8 of file 1 hold the metadata (tables, schemas)
)

const (
	pageFileHeader uint16 = 1
	pageBoot       uint16 = 2
	pageData       uint16 = 3
	pageLog        uint16 = 4
)

// File ids follow SQL Server: 1 is the primary data file, 2 the log, 3.. the
// secondary data files.
const (
	primaryFileID = 1
	logFileID     = 2
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

type pageHeader struct {
	PageID   uint32
	FileID   uint16
	Type     uint16
	ObjectID uint32
	LSN      uint64
}

func putPageHeader(p []byte, h pageHeader) {
	copy(p[0:4], "SQPG")
	binary.LittleEndian.PutUint32(p[4:], h.PageID)
	binary.LittleEndian.PutUint16(p[8:], h.FileID)
	binary.LittleEndian.PutUint16(p[10:], h.Type)
	binary.LittleEndian.PutUint32(p[12:], h.ObjectID)
	binary.LittleEndian.PutUint64(p[16:], h.LSN)
}

func readPageHeader(p []byte) pageHeader {
	return pageHeader{
		PageID:   binary.LittleEndian.Uint32(p[4:]),
		FileID:   binary.LittleEndian.Uint16(p[8:]),
		Type:     binary.LittleEndian.Uint16(p[10:]),
		ObjectID: binary.LittleEndian.Uint32(p[12:]),
		LSN:      binary.LittleEndian.Uint64(p[16:]),
	}
}

func pageChecksum(p []byte) uint32 {
	c := crc32.Update(0, castagnoli, p[:24])
	return crc32.Update(c, castagnoli, p[28:PageSize])
}

func sealPage(p []byte) { binary.LittleEndian.PutUint32(p[24:], pageChecksum(p)) }

// pageOK reports whether p carries its magic and a matching checksum, and
// returns the stored and computed checksums for error messages.
func pageOK(p []byte) (ok bool, stored, actual uint32) {
	stored = binary.LittleEndian.Uint32(p[24:])
	actual = pageChecksum(p)
	return string(p[0:4]) == "SQPG" && stored == actual, stored, actual
}

// TableSpec describes a generated table: its rows are not materialised, but
// its row count and column maxima live in the metadata pages, so
// COUNT_BIG(*) and MAX(col) read them from the files (a restored copy answers
// the same).
type TableSpec struct {
	Schema string // default dbo
	Name   string
	Rows   int64
	// DateColumn is a datetime2 column whose MAX is MaxDate (freshness
	// checks); "" means no date column.
	DateColumn string
	MaxDate    time.Time
	// IDColumn is a bigint column whose MAX is Rows; "" means none.
	IDColumn string
}

// DatabaseSpec describes a database created by Instance.CreateDatabase.
type DatabaseSpec struct {
	Name string
	// Size is the total size of the data files in bytes (rounded up to
	// whole pages, at least 64 pages per file).
	Size int64
	// DataFiles is the number of data files (.mdf + .ndf), default 1.
	DataFiles int
	// Volumes are directories the files are spread over round-robin (the log
	// goes on the last one); default <DataDir>/data.
	Volumes []string
	// LogSize in bytes; default Size/32, at least 64 pages.
	LogSize int64
	// LogicalName is the base logical file name; default Name. Files are
	// named <base>, <base>_2.., <base>_log, each at most 128 characters:
	// as on SQL Server, a name of 124-128 characters needs a shorter
	// LogicalName.
	LogicalName string
	// Tables; default dbo.Orders and dbo.Customers sized from Size.
	Tables []TableSpec
	// AsOf is the newest date in the generated tables; default now (UTC).
	AsOf time.Time
	// FreeSize is space allocated to the data files beyond their data,
	// spread over them: sys.master_files and RESTORE FILELISTONLY count it
	// (it is what a RESTORE creates), a BACKUP does not hold it. The files
	// are sparse, so a database of many gigabytes costs little disk.
	FreeSize int64
	// Filestream gives the database a FILESTREAM filegroup with one
	// container (sys.master_files type 2, FILELISTONLY type S).
	Filestream bool
	// Contained makes it a partially contained database
	// (sys.databases.containment 1, HEADERONLY Containment 1).
	Contained bool
	// Owner is the login that owns the database (dbo; its SID is what the
	// database records); default sa.
	Owner string
	// PageVerify is the PAGE_VERIFY option: "" or CHECKSUM (SQL Server's
	// default), TORN_PAGE_DETECTION or NONE (a database upgraded from an
	// old version).
	PageVerify string
	// BrokerEnabled turns Service Broker message delivery on
	// (is_broker_enabled); every database gets its own broker GUID.
	BrokerEnabled bool
	// LogFreeSize is space allocated to the log beyond LogSize, never
	// written (sparse), like FreeSize.
	LogFreeSize int64
	// Empty makes a database without tables (Tables is ignored), as CREATE
	// DATABASE does: its data pages belong to no table.
	Empty bool
	// RecoveryModel is FULL (default), BULK_LOGGED or SIMPLE
	// (sys.databases.recovery_model_desc, logchain.go).
	RecoveryModel string
	// CommitLog gives the database the workload table dbo.CommitLog
	// (workload.go) with room for CommitLogRows rows (default 180000);
	// CommitRate > 0 implies it and starts committing that many rows a
	// second at once (Instance.StartWorkload, StopWorkload).
	CommitLog     bool
	CommitLogRows int64
	CommitRate    float64
}

// metadata is what the boot pages hold: the tables of the database.
type metadata struct {
	Database string      `json:"database"`
	Schemas  []string    `json:"schemas"`
	Tables   []*tableDef `json:"tables"`
	// DboSID is the SID of the owner's login as the database records it
	// (hex; "" is sa's, 0x01): a restored copy keeps its source's, and on
	// another instance it names a login there only when that login was
	// created with the same SID (security.go).
	DboSID    string       `json:"dbo_sid,omitempty"`
	Users     []*dbUserDef `json:"users,omitempty"`
	Functions []*funcDef   `json:"functions,omitempty"`
	// PageVerify is the PAGE_VERIFY option ("" is CHECKSUM, the default
	// of a new database since SQL Server 2005).
	PageVerify string `json:"page_verify,omitempty"`
	// BrokerGUID and BrokerEnabled are sys.databases.service_broker_guid
	// and is_broker_enabled: Service Broker's identity and whether it
	// delivers messages (restore.go).
	BrokerGUID    guid `json:"broker_guid,omitzero"`
	BrokerEnabled bool `json:"broker_enabled,omitempty"`
	// ReadOnly is the READ_ONLY option as the database keeps it: a restored
	// copy of a read-only database is read-only too.
	ReadOnly bool       `json:"read_only,omitempty"`
	Views    []*viewDef `json:"views,omitempty"` // CREATE VIEW (createdb.go)
}

type tableDef struct {
	Schema   string      `json:"schema"`
	Name     string      `json:"name"`
	ObjectID uint32      `json:"object_id"`
	Columns  []columnDef `json:"columns"`
	// Generated tables: RowCount and per-column Max/Min, data pages in Extents.
	Generated bool        `json:"generated,omitempty"`
	RowCount  int64       `json:"row_count,omitempty"`
	Extents   []extentDef `json:"extents,omitempty"`
	// User tables (CREATE TABLE): rows stored here, constraints enforced.
	Rows [][]any `json:"rows,omitempty"`
	// CommitLog marks the workload's dbo.CommitLog, whose rows are slots
	// in its Extents (workload.go).
	CommitLog  bool       `json:"commit_log,omitempty"`
	PrimaryKey *keyDef    `json:"primary_key,omitempty"`
	Checks     []checkDef `json:"checks,omitempty"`
}

type columnDef struct {
	Name    string `json:"name"`
	Type    string `json:"type"` // int, bigint, nvarchar, datetime2
	NotNull bool   `json:"not_null,omitempty"`
	Max     any    `json:"max,omitempty"`
	Min     any    `json:"min,omitempty"`
}

type keyDef struct {
	Name    string   `json:"name"`
	Columns []string `json:"columns"`
}

type checkDef struct {
	Name string `json:"name"`
	Expr string `json:"expr"` // T-SQL text, re-parsed when enforced
}

type extentDef struct {
	FileID int    `json:"file_id"`
	First  uint32 `json:"first"`
	Count  uint32 `json:"count"`
}

func (t *tableDef) column(name string) (int, *columnDef) {
	for i := range t.Columns {
		if strings.EqualFold(t.Columns[i].Name, name) {
			return i, &t.Columns[i]
		}
	}
	return -1, nil
}

// dbFile is one file of a database.
type dbFile struct {
	FileID   int    `json:"file_id"`
	Logical  string `json:"logical"`
	Path     string `json:"path"` // local path of the file
	Physical string `json:"physical"`
	Log      bool   `json:"log"`
	Pages    int64  `json:"pages"`
	// Free are pages allocated past the data, never written (sparse): in
	// the file's size, not in a backup.
	Free int64 `json:"free,omitempty"`
	// Filestream marks a FILESTREAM container.
	Filestream bool `json:"filestream,omitempty"`
}

// bytes is the file's allocated size.
func (f dbFile) bytes() int64 { return (f.Pages + f.Free) * PageSize }

func (f dbFile) typeDesc() string {
	switch {
	case f.Log:
		return "LOG"
	case f.Filestream:
		return "FILESTREAM"
	}
	return "ROWS"
}

// typeID is sys.master_files.type: 0 rows, 1 log, 2 FILESTREAM
// (https://learn.microsoft.com/en-us/sql/relational-databases/system-catalog-views/sys-master-files-transact-sql).
func (f dbFile) typeID() int64 {
	switch {
	case f.Log:
		return 1
	case f.Filestream:
		return 2
	}
	return 0
}

// bodyTemplates are the page bodies data pages are made from: row-like text
// with numbers, so a database compresses about like a real one (2-4x with
// flate), and generating a gigabyte costs a copy and a CRC per page.
var bodyTemplates = makeBodyTemplates(61)

func makeBodyTemplates(n int) [][]byte {
	cities := []string{"Zurich", "Berlin", "Lisbon", "Oslo", "Madrid", "Vienna", "Prague", "Dublin", "Paris", "Milan"}
	status := []string{"Shipped", "Pending", "Cancelled", "Delivered", "Returned"}
	products := []string{"Widget", "Gadget", "Sprocket", "Gizmo", "Doohickey", "Flange", "Bracket"}
	r := rand.New(rand.NewPCG(7, 11))
	out := make([][]byte, n)
	for i := range out {
		var b strings.Builder
		for b.Len() < PageSize-pageHeaderSize {
			fmt.Fprintf(&b, "%09d|%s %04d|%s|%s x%d|2026-%02d-%02d %02d:%02d|%8.2f|%s;",
				r.IntN(1_000_000_000), "Customer", r.IntN(10000), cities[r.IntN(len(cities))],
				products[r.IntN(len(products))], 1+r.IntN(20), 1+r.IntN(12), 1+r.IntN(28), r.IntN(24), r.IntN(60),
				float64(r.IntN(10_000_000))/100, status[r.IntN(len(status))])
		}
		out[i] = []byte(b.String()[:PageSize-pageHeaderSize])
	}
	return out
}

// fillDataPage writes a generated data page into p.
func fillDataPage(p []byte, fileID uint16, pageID uint32, objectID uint32, lsn uint64) {
	clear(p[:pageHeaderSize])
	putPageHeader(p, pageHeader{PageID: pageID, FileID: fileID, Type: pageData, ObjectID: objectID, LSN: lsn})
	copy(p[pageHeaderSize:], bodyTemplates[(uint64(pageID)*7+uint64(fileID))%uint64(len(bodyTemplates))])
	sealPage(p)
}

func fillLogPage(p []byte, pageID uint32, lsn uint64) {
	clear(p)
	putPageHeader(p, pageHeader{PageID: pageID, FileID: logFileID, Type: pageLog, LSN: lsn + uint64(pageID)})
	// A log page repeats short records: very compressible, like an idle log.
	for off := pageHeaderSize; off+32 <= PageSize; off += 32 {
		binary.LittleEndian.PutUint64(p[off:], lsn+uint64(pageID)*256+uint64(off/32))
		copy(p[off+8:off+32], "LOP_MODIFY_ROW LCX_HEAP ")
	}
	sealPage(p)
}

type fileHeaderInfo struct {
	Database string `json:"database"`
	FileID   int    `json:"file_id"`
	Logical  string `json:"logical"`
	Pages    int64  `json:"pages"`
}

func fileHeaderPage(p []byte, info fileHeaderInfo, lsn uint64) error {
	clear(p)
	putPageHeader(p, pageHeader{PageID: 0, FileID: uint16(info.FileID), Type: pageFileHeader, LSN: lsn})
	b, err := json.Marshal(info)
	if err != nil {
		return err
	}
	if len(b) > PageSize-pageHeaderSize-4 {
		return fmt.Errorf("file header of %q too large", info.Logical)
	}
	binary.LittleEndian.PutUint32(p[pageHeaderSize:], uint32(len(b)))
	copy(p[pageHeaderSize+4:], b)
	sealPage(p)
	return nil
}

// writeBoot stores the metadata in the boot pages of the primary file.
func writeBoot(f *os.File, md *metadata, lsn uint64) error {
	b, err := json.Marshal(md)
	if err != nil {
		return fmt.Errorf("encode metadata of %q: %w", md.Database, err)
	}
	per := PageSize - pageHeaderSize - 4
	if len(b) > per*bootPages {
		return fmt.Errorf("metadata of database %q is %d bytes, the emulator keeps at most %d: use fewer tables or rows", md.Database, len(b), per*bootPages)
	}
	buf := make([]byte, PageSize*bootPages)
	for i := range bootPages {
		p := buf[i*PageSize : (i+1)*PageSize]
		putPageHeader(p, pageHeader{PageID: uint32(1 + i), FileID: primaryFileID, Type: pageBoot, LSN: lsn})
		chunk := b[min(len(b), i*per):min(len(b), (i+1)*per)]
		binary.LittleEndian.PutUint32(p[pageHeaderSize:], uint32(len(chunk)))
		copy(p[pageHeaderSize+4:], chunk)
		sealPage(p)
	}
	if _, err := f.WriteAt(buf, PageSize); err != nil {
		return fmt.Errorf("write metadata pages of %q: %w", md.Database, err)
	}
	return nil
}

// errBadBootPage is returned by readBoot when a metadata page fails its
// checksum: the database's tables cannot be read.
var errBadBootPage = errors.New("metadata page checksum mismatch")

// readBoot reads the metadata from the boot pages of the primary file.
func readBoot(path string) (*metadata, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	buf := make([]byte, PageSize*bootPages)
	if _, err := f.ReadAt(buf, PageSize); err != nil {
		return nil, fmt.Errorf("read metadata pages of %s: %w", path, err)
	}
	var js []byte
	for i := range bootPages {
		p := buf[i*PageSize : (i+1)*PageSize]
		if ok, _, _ := pageOK(p); !ok {
			return nil, fmt.Errorf("%w: page (1:%d) of %s", errBadBootPage, i+1, path)
		}
		n := binary.LittleEndian.Uint32(p[pageHeaderSize:])
		if int(n) > PageSize-pageHeaderSize-4 {
			return nil, fmt.Errorf("%w: page (1:%d) of %s has a bad length", errBadBootPage, i+1, path)
		}
		js = append(js, p[pageHeaderSize+4:pageHeaderSize+4+int(n)]...)
	}
	md := &metadata{}
	if err := json.Unmarshal(js, md); err != nil {
		return nil, fmt.Errorf("decode metadata of %s: %w", path, err)
	}
	return md, nil
}

// fileSafe maps a database name to a file-system-safe name part.
func fileSafe(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '_', r == '-':
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
		if b.Len() >= 60 {
			break
		}
	}
	return b.String()
}

// layoutFiles decides the files of a new database.
func layoutFiles(spec DatabaseSpec, dbID int, defaultDir string) ([]dbFile, error) {
	if spec.DataFiles <= 0 {
		spec.DataFiles = 1
	}
	if spec.DataFiles > 64 {
		return nil, fmt.Errorf("database %q: %d data files, the emulator allows at most 64", spec.Name, spec.DataFiles)
	}
	vols := spec.Volumes
	if len(vols) == 0 {
		vols = []string{defaultDir}
	}
	base := spec.LogicalName
	if base == "" {
		base = spec.Name
	}
	// Names are sysname (at most 128 characters); a generated logical name
	// must fit too: "If a logical log file name is not specified, SQL Server
	// generates the logical_file_name ... by appending a suffix to
	// database_name. This limits database_name to 123 characters"
	// (https://learn.microsoft.com/en-us/sql/t-sql/statements/create-database-transact-sql).
	if n := sqlLen(spec.Name); n > maxSysname {
		return nil, fmt.Errorf("database name %q is %d characters; SQL Server allows at most %d", spec.Name, n, maxSysname)
	}
	longest := base + "_log"
	if spec.DataFiles > 1 {
		if s := fmt.Sprintf("%s_%d", base, spec.DataFiles); sqlLen(s) > sqlLen(longest) {
			longest = s
		}
	}
	if n := sqlLen(longest); n > maxSysname {
		return nil, fmt.Errorf("database %q: the logical file name %q would be %d characters, SQL Server allows at most %d; "+
			"give DatabaseSpec.LogicalName of at most %d characters", spec.Name, longest, n, maxSysname, maxSysname-(sqlLen(longest)-sqlLen(base)))
	}
	perFile := (spec.Size + PageSize - 1) / PageSize / int64(spec.DataFiles)
	perFile = max(perFile, 64)
	logPages := spec.LogSize / PageSize
	if logPages == 0 {
		logPages = spec.Size / 32 / PageSize
	}
	logPages = max(logPages, 64)
	stem := fmt.Sprintf("%s_%d", fileSafe(spec.Name), dbID)
	var files []dbFile
	for i := range spec.DataFiles {
		id, logical, ext := primaryFileID, base, ".mdf"
		if i > 0 {
			id, logical, ext = 2+i, fmt.Sprintf("%s_%d", base, i+1), ".ndf"
		}
		p := filepath.Join(vols[i%len(vols)], fmt.Sprintf("%s_%d%s", stem, i+1, ext))
		files = append(files, dbFile{FileID: id, Logical: logical, Path: p, Physical: p, Pages: perFile})
	}
	lp := filepath.Join(vols[len(vols)-1], stem+"_log.ldf")
	files = append(files, dbFile{FileID: logFileID, Logical: base + "_log", Path: lp, Physical: lp, Log: true, Pages: logPages,
		Free: max(0, spec.LogFreeSize/PageSize)})
	files[0].Pages += bootPages // the metadata pages come on top of the data
	if free := (spec.FreeSize + PageSize - 1) / PageSize; free > 0 {
		for i := range spec.DataFiles {
			f := &files[i]
			f.Free = free / int64(spec.DataFiles)
			if i == 0 {
				f.Free += free % int64(spec.DataFiles)
			}
		}
	}
	if spec.Filestream {
		fp := filepath.Join(vols[0], stem+"_fs")
		files = append(files, dbFile{FileID: spec.DataFiles + 2, Logical: base + "_fs", Path: fp, Physical: fp, Pages: 64, Filestream: true})
	}
	return files, nil
}

// planTables fills in default tables and gives every table its data pages:
// each data file's data pages are split among the tables in proportion to
// their row counts.
func planTables(spec DatabaseSpec, files []dbFile) (*metadata, error) {
	asOf := spec.AsOf
	if asOf.IsZero() {
		asOf = time.Now().UTC()
	}
	asOf = asOf.Truncate(time.Second)
	var dataPages int64
	for _, f := range files {
		if !f.Log && !f.Filestream {
			dataPages += f.Pages
		}
	}
	tables := spec.Tables
	if spec.Empty {
		return &metadata{Database: spec.Name, Schemas: []string{"dbo"}}, nil
	}
	if len(tables) == 0 {
		rows := max(dataPages*30, 100)
		tables = []TableSpec{
			{Schema: "dbo", Name: "Orders", Rows: rows * 4 / 5, DateColumn: "OrderDate", IDColumn: "OrderID", MaxDate: asOf},
			{Schema: "dbo", Name: "Customers", Rows: rows / 5, DateColumn: "CreatedAt", IDColumn: "CustomerID", MaxDate: asOf.Add(-24 * time.Hour)},
		}
	}
	md := &metadata{Database: spec.Name, Schemas: []string{"dbo"}}
	var total int64
	for i, ts := range tables {
		if ts.Name == "" {
			return nil, fmt.Errorf("database %q: table %d has no name", spec.Name, i+1)
		}
		if ts.Schema == "" {
			ts.Schema = "dbo"
		}
		if !containsFold(md.Schemas, ts.Schema) {
			md.Schemas = append(md.Schemas, ts.Schema)
		}
		t := &tableDef{Schema: ts.Schema, Name: ts.Name, ObjectID: uint32(245575913 + 16000057*i), Generated: true, RowCount: ts.Rows}
		if ts.IDColumn != "" {
			t.Columns = append(t.Columns, columnDef{Name: ts.IDColumn, Type: "bigint", NotNull: true, Max: float64(ts.Rows), Min: float64(min(1, ts.Rows))})
		}
		if ts.DateColumn != "" {
			d := ts.MaxDate
			if d.IsZero() {
				d = asOf
			}
			t.Columns = append(t.Columns, columnDef{Name: ts.DateColumn, Type: "datetime2", NotNull: true,
				Max: d.UTC().Format(time.RFC3339Nano), Min: d.UTC().AddDate(-3, 0, 0).Format(time.RFC3339Nano)})
		}
		t.Columns = append(t.Columns, columnDef{Name: "Payload", Type: "nvarchar"})
		md.Tables = append(md.Tables, t)
		total += max(ts.Rows, 1)
	}
	for _, f := range files {
		if f.Log || f.Filestream {
			continue
		}
		first := uint32(1)
		if f.FileID == primaryFileID {
			first = 1 + bootPages
		}
		avail := int64(uint32(f.Pages) - first)
		var used int64
		for i, t := range md.Tables {
			n := avail * max(tables[i].Rows, 1) / total
			if i == len(md.Tables)-1 {
				n = avail - used
			}
			if n > 0 {
				t.Extents = append(t.Extents, extentDef{FileID: f.FileID, First: first + uint32(used), Count: uint32(n)})
			}
			used += n
		}
	}
	return md, nil
}

func containsFold(list []string, s string) bool {
	for _, x := range list {
		if strings.EqualFold(x, s) {
			return true
		}
	}
	return false
}

// ownerMap tells, for a file, which object owns each data page.
func ownerOf(md *metadata, fileID int, pageID uint32) uint32 {
	for _, t := range md.Tables {
		for _, e := range t.Extents {
			if e.FileID == fileID && pageID >= e.First && pageID < e.First+e.Count {
				return t.ObjectID
			}
		}
	}
	return 0
}

// writeDatabaseFiles creates the files of a new database on disk.
func writeDatabaseFiles(name string, files []dbFile, md *metadata, lsn uint64) (err error) {
	var created []string
	defer func() {
		if err != nil {
			for _, p := range created {
				os.Remove(p)
			}
		}
	}()
	for _, f := range files {
		if err := os.MkdirAll(filepath.Dir(f.Path), 0o755); err != nil {
			return fmt.Errorf("create directory for %s: %w", f.Path, err)
		}
		fh, err := os.OpenFile(f.Path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
		if err != nil {
			return fmt.Errorf("create database file %s: %w", f.Path, err)
		}
		created = append(created, f.Path)
		err = writeOneFile(fh, name, f, md, lsn)
		if err == nil && f.Free > 0 {
			err = fh.Truncate(f.bytes()) // sparse: allocated, never written
		}
		if cerr := fh.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("write database file %s: %w", f.Path, err)
		}
	}
	return nil
}

func writeOneFile(fh *os.File, name string, f dbFile, md *metadata, lsn uint64) error {
	const chunkPages = 128
	buf := make([]byte, chunkPages*PageSize)
	owners := make([]uint32, f.Pages)
	empty := map[uint32]bool{} // tables whose pages start empty
	for _, t := range md.Tables {
		if t.CommitLog {
			empty[t.ObjectID] = true
		}
		for _, e := range t.Extents {
			if e.FileID == f.FileID {
				for p := e.First; p < e.First+e.Count && int64(p) < f.Pages; p++ {
					owners[p] = t.ObjectID
				}
			}
		}
	}
	for start := int64(0); start < f.Pages; start += chunkPages {
		n := min(chunkPages, f.Pages-start)
		for i := range n {
			pid := uint32(start + i)
			p := buf[i*PageSize : (i+1)*PageSize]
			switch {
			case pid == 0:
				if err := fileHeaderPage(p, fileHeaderInfo{Database: name, FileID: f.FileID, Logical: f.Logical, Pages: f.Pages}, lsn); err != nil {
					return err
				}
			case f.Log:
				fillLogPage(p, pid, lsn)
			case f.FileID == primaryFileID && pid <= bootPages:
				clear(p) // written by writeBoot below
			case empty[owners[pid]]:
				emptyDataPage(p, uint16(f.FileID), pid, owners[pid], lsn)
			default:
				fillDataPage(p, uint16(f.FileID), pid, owners[pid], lsn)
			}
		}
		if _, err := fh.WriteAt(buf[:n*PageSize], start*PageSize); err != nil {
			return err
		}
	}
	if f.FileID == primaryFileID {
		return writeBoot(fh, md, lsn)
	}
	return nil
}

// maxSysname is the length limit of identifiers and of names stored as
// sysname (nvarchar(128)): databases, logical file names, ...
// (https://learn.microsoft.com/en-us/sql/relational-databases/databases/database-identifiers).
const maxSysname = 128

// sqlLen counts characters as SQL Server does for nvarchar: UTF-16 code
// units (a character outside the BMP counts 2).
func sqlLen(s string) int {
	n := 0
	for _, r := range s {
		if r >= 0x10000 {
			n += 2
		} else {
			n++
		}
	}
	return n
}
