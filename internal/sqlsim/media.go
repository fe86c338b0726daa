package sqlsim

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"time"

	"github.com/klauspost/compress/flate"
)

// The backup media format. Each stripe (media family) file is:
//
//	media header   "SQSIMBAK" | uint32 header region length | uint32 JSON length |
//	               uint32 CRC-32C of the JSON | JSON (mediaHeader) | zero padding
//	blocks         32-byte block header | payload (raw or flate-compressed pages)
//	trailer        "SQSIMEND" | uint32 JSON length | uint32 CRC | JSON (mediaTrailer) |
//	               uint64 offset of "SQSIMEND" | "SQSIMTRL"
//
// Block header: "SQBK" | uint32 block sequence (over the whole set) | uint32
// raw length | uint32 stored length | uint16 flags (1 = compressed) | uint16
// first file id | uint32 first page id | uint32 CRC-32C of the stored
// payload | uint32 CRC-32C of the preceding 28 header bytes. Flag 2: the
// payload is encrypted (BACKUP WITH ENCRYPTION, backupenc.go), after it was
// compressed; the CRC is the stored bytes'.
//
// Blocks are MAXTRANSFERSIZE of pages and go to the stripes round-robin
// (block k to stripe k mod n). A stripe without its trailer was never
// finished (crash, cancel, full disk) and is refused by every RESTORE.

const (
	mediaMagic   = "SQSIMBAK"
	trailerMagic = "SQSIMEND"
	trailerTail  = "SQSIMTRL"
	blockMagic   = "SQBK"
	blockHdrSize = 32
	flagCompress = 1
	flagEncrypt  = 2 // the payload is encrypted (backupenc.go), after compression
	mediaAlign   = 4096
)

type guid [16]byte

func newGUID() guid {
	var g guid
	rand.Read(g[:])
	g[6] = g[6]&0x0f | 0x40
	g[8] = g[8]&0x3f | 0x80
	return g
}

func (g guid) String() string {
	h := hex.EncodeToString(g[:])
	return fmt.Sprintf("%s-%s-%s-%s-%s", h[0:8], h[8:12], h[12:16], h[16:20], h[20:32])
}

func (g guid) MarshalText() ([]byte, error) { return []byte(g.String()), nil }

func (g *guid) UnmarshalText(b []byte) error {
	s := bytes.ReplaceAll(b, []byte("-"), nil)
	if len(s) != 32 {
		return fmt.Errorf("bad guid %q", b)
	}
	_, err := hex.Decode(g[:], s)
	return err
}

type mediaFile struct {
	FileID    int    `json:"file_id"`
	Logical   string `json:"logical"`
	Physical  string `json:"physical"`
	Log       bool   `json:"log"`
	Pages     int64  `json:"pages"`
	FileGroup string `json:"file_group"`
	UniqueID  guid   `json:"unique_id"`
	// Free are the file's allocated pages past its data: RESTORE creates
	// them, the backup does not hold them (see dbFile.Free).
	Free       int64 `json:"free,omitempty"`
	Filestream bool  `json:"filestream,omitempty"`
}

// bytes is the file's allocated size, FILELISTONLY's Size.
func (f mediaFile) bytes() int64 { return (f.Pages + f.Free) * PageSize }

type mediaHeader struct {
	Format          int         `json:"format"`
	MediaSetGUID    guid        `json:"media_set_guid"`
	FamilyGUID      guid        `json:"family_guid"`
	BackupSetGUID   guid        `json:"backup_set_guid"`
	Family          int         `json:"family"`   // 1-based
	Families        int         `json:"families"` // stripes of the set
	Server          string      `json:"server"`
	Database        string      `json:"database"`
	DatabaseID      int         `json:"database_id"`
	DatabaseCreated time.Time   `json:"database_created"`
	User            string      `json:"user"`
	Files           []mediaFile `json:"files"`
	FirstLSN        uint64      `json:"first_lsn"`
	LastLSN         uint64      `json:"last_lsn"`
	CheckpointLSN   uint64      `json:"checkpoint_lsn"`
	DatabaseLSN     uint64      `json:"database_backup_lsn"`
	Start           time.Time   `json:"start"`
	Compressed      bool        `json:"compressed"`
	Checksums       bool        `json:"checksums"`
	CopyOnly        bool        `json:"copy_only"`
	BlockSize       int         `json:"block_size"`
	MaxTransferSize int         `json:"max_transfer_size"`
	TotalPages      int64       `json:"total_pages"`
	TotalBlocks     int64       `json:"total_blocks"`
	Name            string      `json:"name"`
	Description     string      `json:"description"`
	// DatabaseFamilyGUID is the source database's family GUID; media
	// written before it was recorded have zero (see headerFamilyGUID).
	DatabaseFamilyGUID guid `json:"database_family_guid"`
	// SoftwareVersion is the ProductVersion of the instance that wrote the
	// backup (HEADERONLY SoftwareVersionMajor/Minor/Build); media written
	// before it was recorded have "", read as 16.0.4135 (what HEADERONLY
	// reported for them).
	SoftwareVersion string `json:"software_version,omitempty"`
	// TDEThumbprint (hex) is the certificate protecting the encryption key
	// of a TDE database's backup: reading it needs that certificate.
	TDEThumbprint string `json:"tde_thumbprint,omitempty"`
	// TDECompressedFormat marks a compressed backup of a TDE database in the
	// format SQL Server 2019 CU16 and later write (KB5014298).
	TDECompressedFormat bool `json:"tde_compressed_format,omitempty"`
	// Containment is the database's (HEADERONLY Containment).
	Containment int `json:"containment,omitempty"`
	// CompressionAlgorithm is compressionMSXpress or compressionQAT for a
	// compressed set (HEADERONLY CompressionAlgorithm); 0 reads as
	// MS_XPRESS.
	CompressionAlgorithm int `json:"compression_algorithm,omitempty"`
	// LastGoodCheckDB is the source database's LastGoodCheckDbTime as the
	// BACKUP read it: wall-clock text on the source's clock (see
	// database.LastGoodCheckDB); RESTORE gives it to the copy.
	LastGoodCheckDB string `json:"last_good_checkdb,omitempty"`
	// UserAccess is the source database's SINGLE_USER, RESTRICTED_USER or
	// MULTI_USER at the time of the backup ("" reads as MULTI_USER): a
	// database option, kept in the database itself, so a RESTORE gives it
	// to the copy (HEADERONLY IsSingleUser: "1 = Database was single user
	// at time of backup", "RESTORE Statements - HEADERONLY (Transact-SQL)").
	UserAccess string `json:"user_access,omitempty"`
	// Type is 2 for a log backup, 5 for a differential, 0 or 1 for a full
	// database backup
	// (HEADERONLY BackupType); RecoveryModel and BeginsLogChain are
	// HEADERONLY's; LogEnd is the wall clock at which a log backup's
	// LastLSN was the end of the log (the latest point it can restore to).
	Type           int       `json:"type,omitempty"`
	RecoveryModel  string    `json:"recovery_model,omitempty"`
	BeginsLogChain bool      `json:"begins_log_chain,omitempty"`
	LogEnd         time.Time `json:"log_end,omitzero"`
	// Forks is the recovery path the set covers (forks.go, headerForks).
	Forks forkRange `json:"forks,omitzero"`
	// A differential's base (Type 5, differential.go): the CheckpointLSN
	// and the backup set GUID of the full it is based on.
	DiffBaseLSN  uint64 `json:"differential_base_lsn,omitempty"`
	DiffBaseGUID guid   `json:"differential_base_guid,omitzero"`
	// An encrypted set (BACKUP WITH ENCRYPTION, backupenc.go): its
	// algorithm (AES_256, ...), the encryptor's thumbprint (hex) and type
	// (HEADERONLY KeyAlgorithm, EncryptorThumbprint, EncryptorType), and
	// the set's key sealed with the encryptor's private key (hex).
	KeyAlgorithm        string `json:"key_algorithm,omitempty"`
	EncryptorThumbprint string `json:"encryptor_thumbprint,omitempty"`
	EncryptorType       string `json:"encryptor_type,omitempty"`
	EncryptedKey        string `json:"encrypted_key,omitempty"`
}

type mediaTrailer struct {
	BackupSetGUID guid      `json:"backup_set_guid"`
	Family        int       `json:"family"`
	Blocks        int64     `json:"blocks"`
	RawBytes      int64     `json:"raw_bytes"`
	StoredBytes   int64     `json:"stored_bytes"`
	Finish        time.Time `json:"finish"`
	SetRawBytes   int64     `json:"set_raw_bytes"`
	SetStored     int64     `json:"set_stored_bytes"`
	// LastLSN is a data backup's LastLSN, known only at its end (0 in
	// media written before: the header's); Redo the log records committed
	// while it copied, which RESTORE redoes (workload.go).
	LastLSN uint64   `json:"last_lsn,omitempty"`
	Redo    []logRec `json:"redo,omitempty"`
}

func encodeMediaHeader(h *mediaHeader) ([]byte, error) {
	js, err := json.Marshal(h)
	if err != nil {
		return nil, err
	}
	n := 20 + len(js)
	region := (n + mediaAlign - 1) / mediaAlign * mediaAlign
	buf := make([]byte, region)
	copy(buf, mediaMagic)
	binary.LittleEndian.PutUint32(buf[8:], uint32(region))
	binary.LittleEndian.PutUint32(buf[12:], uint32(len(js)))
	binary.LittleEndian.PutUint32(buf[16:], crc32.Checksum(js, castagnoli))
	copy(buf[20:], js)
	return buf, nil
}

var errBadMedia = errors.New("incorrectly formed media family")

// readMediaHeader returns the header and the offset where blocks start.
func readMediaHeader(f io.ReaderAt) (*mediaHeader, int64, error) {
	var fixed [20]byte
	if _, err := f.ReadAt(fixed[:], 0); err != nil {
		return nil, 0, fmt.Errorf("%w: header: %v", errBadMedia, err)
	}
	if string(fixed[:8]) != mediaMagic {
		return nil, 0, fmt.Errorf("%w: not a backup file", errBadMedia)
	}
	region := binary.LittleEndian.Uint32(fixed[8:])
	n := binary.LittleEndian.Uint32(fixed[12:])
	if n > 1<<24 || int64(n)+20 > int64(region) {
		return nil, 0, fmt.Errorf("%w: header length", errBadMedia)
	}
	js := make([]byte, n)
	if _, err := f.ReadAt(js, 20); err != nil {
		return nil, 0, fmt.Errorf("%w: header: %v", errBadMedia, err)
	}
	if crc32.Checksum(js, castagnoli) != binary.LittleEndian.Uint32(fixed[16:]) {
		return nil, 0, fmt.Errorf("%w: header checksum", errBadMedia)
	}
	h := &mediaHeader{}
	if err := json.Unmarshal(js, h); err != nil {
		return nil, 0, fmt.Errorf("%w: header: %v", errBadMedia, err)
	}
	return h, int64(region), nil
}

func encodeTrailer(t *mediaTrailer, at int64) ([]byte, error) {
	js, err := json.Marshal(t)
	if err != nil {
		return nil, err
	}
	buf := make([]byte, 16+len(js)+16)
	copy(buf, trailerMagic)
	binary.LittleEndian.PutUint32(buf[8:], uint32(len(js)))
	binary.LittleEndian.PutUint32(buf[12:], crc32.Checksum(js, castagnoli))
	copy(buf[16:], js)
	binary.LittleEndian.PutUint64(buf[16+len(js):], uint64(at))
	copy(buf[16+len(js)+8:], trailerTail)
	return buf, nil
}

// readTrailer returns the trailer and where it starts (the end of the
// blocks); a stripe without a valid trailer was never finished.
func readTrailer(f io.ReaderAt, size int64) (*mediaTrailer, int64, error) {
	if size < 32 {
		return nil, 0, fmt.Errorf("%w: no trailer", errBadMedia)
	}
	var tail [16]byte
	if _, err := f.ReadAt(tail[:], size-16); err != nil {
		return nil, 0, fmt.Errorf("%w: trailer: %v", errBadMedia, err)
	}
	if string(tail[8:]) != trailerTail {
		return nil, 0, fmt.Errorf("%w: the stripe was not finished (no trailer)", errBadMedia)
	}
	at := int64(binary.LittleEndian.Uint64(tail[:8]))
	if at < 0 || at > size-32 {
		return nil, 0, fmt.Errorf("%w: trailer offset", errBadMedia)
	}
	var fixed [16]byte
	if _, err := f.ReadAt(fixed[:], at); err != nil || string(fixed[:8]) != trailerMagic {
		return nil, 0, fmt.Errorf("%w: trailer magic", errBadMedia)
	}
	n := int64(binary.LittleEndian.Uint32(fixed[8:]))
	if at+16+n+16 != size {
		return nil, 0, fmt.Errorf("%w: trailer length", errBadMedia)
	}
	js := make([]byte, n)
	if _, err := f.ReadAt(js, at+16); err != nil {
		return nil, 0, fmt.Errorf("%w: trailer: %v", errBadMedia, err)
	}
	if crc32.Checksum(js, castagnoli) != binary.LittleEndian.Uint32(fixed[12:]) {
		return nil, 0, fmt.Errorf("%w: trailer checksum", errBadMedia)
	}
	t := &mediaTrailer{}
	if err := json.Unmarshal(js, t); err != nil {
		return nil, 0, fmt.Errorf("%w: trailer: %v", errBadMedia, err)
	}
	return t, at, nil
}

type blockHeader struct {
	Seq       uint32
	RawLen    uint32
	StoredLen uint32
	Flags     uint16
	FileID    uint16
	PageID    uint32
	CRC       uint32
}

func putBlockHeader(b []byte, h blockHeader) {
	copy(b, blockMagic)
	binary.LittleEndian.PutUint32(b[4:], h.Seq)
	binary.LittleEndian.PutUint32(b[8:], h.RawLen)
	binary.LittleEndian.PutUint32(b[12:], h.StoredLen)
	binary.LittleEndian.PutUint16(b[16:], h.Flags)
	binary.LittleEndian.PutUint16(b[18:], h.FileID)
	binary.LittleEndian.PutUint32(b[20:], h.PageID)
	binary.LittleEndian.PutUint32(b[24:], h.CRC)
	binary.LittleEndian.PutUint32(b[28:], crc32.Checksum(b[:28], castagnoli))
}

func parseBlockHeader(b []byte) (blockHeader, bool) {
	if string(b[:4]) != blockMagic || crc32.Checksum(b[:28], castagnoli) != binary.LittleEndian.Uint32(b[28:]) {
		return blockHeader{}, false
	}
	return blockHeader{
		Seq:       binary.LittleEndian.Uint32(b[4:]),
		RawLen:    binary.LittleEndian.Uint32(b[8:]),
		StoredLen: binary.LittleEndian.Uint32(b[12:]),
		Flags:     binary.LittleEndian.Uint16(b[16:]),
		FileID:    binary.LittleEndian.Uint16(b[18:]),
		PageID:    binary.LittleEndian.Uint32(b[20:]),
		CRC:       binary.LittleEndian.Uint32(b[24:]),
	}, true
}

// compressor is a reusable deflate writer at BestSpeed (SQL Server's backup
// compression is also tuned for throughput). klauspost/compress's deflate
// is used for speed: the standard library's runs at a fraction of the rate
// and would make the emulator, not the network, the bottleneck.
type compressor struct {
	buf bytes.Buffer
	w   *flate.Writer
}

func (c *compressor) compress(raw []byte) ([]byte, error) {
	c.buf.Reset()
	if c.w == nil {
		w, err := flate.NewWriter(&c.buf, flate.BestSpeed)
		if err != nil {
			return nil, err
		}
		c.w = w
	} else {
		c.w.Reset(&c.buf)
	}
	if _, err := c.w.Write(raw); err != nil {
		return nil, err
	}
	if err := c.w.Close(); err != nil {
		return nil, err
	}
	return c.buf.Bytes(), nil
}

// openStripe opens a finished stripe: header, trailer and the block range.
type stripe struct {
	path    string // as given in the statement
	f       *os.File
	hdr     *mediaHeader
	trl     *mediaTrailer
	start   int64 // first block
	end     int64 // trailer offset
	limit   *limiter
	shareLm *limiter
	netErr  func() string // the OS error of a share lost mid-read, "" while it is there
	release func()        // gives the file back to the device table
}

func (st *stripe) close() {
	st.f.Close()
	if st.release != nil {
		st.release()
	}
}

// unfinished tells apart why a stripe has no valid trailer: truncated (its
// bytes end inside a block or inside the trailer, as a file cut short by an
// interrupted copy does) or not (its blocks are whole and nothing follows
// them: a BACKUP that stopped; or the bytes after the blocks are damaged).
func unfinished(f io.ReaderAt, size, start int64) (truncated bool) {
	hdr := make([]byte, blockHdrSize)
	off := start
	for off < size {
		if size-off < int64(len(trailerMagic)) {
			return true
		}
		n := min(int64(blockHdrSize), size-off)
		if _, err := f.ReadAt(hdr[:n], off); err != nil && !errors.Is(err, io.EOF) {
			return false
		}
		if string(hdr[:len(trailerMagic)]) == trailerMagic {
			// A trailer whose declared length runs past the end was cut.
			if n < 16 {
				return true
			}
			js := int64(binary.LittleEndian.Uint32(hdr[8:]))
			return off+16+js+16 > size
		}
		if n < blockHdrSize {
			return string(hdr[:len(blockMagic)]) == blockMagic
		}
		bh, ok := parseBlockHeader(hdr)
		if !ok {
			return false
		}
		if off+blockHdrSize+int64(bh.StoredLen) > size {
			return true
		}
		off += blockHdrSize + int64(bh.StoredLen)
	}
	return false
}

func crc32Checksum(b []byte) uint32 { return crc32.Checksum(b, castagnoli) }

// mediaHeaderCut reports whether the file ends inside its media header
// region (a file cut short right after it began).
func mediaHeaderCut(f io.ReaderAt, size int64) bool {
	var fixed [20]byte
	n, _ := f.ReadAt(fixed[:], 0)
	if n < len(mediaMagic) || string(fixed[:len(mediaMagic)]) != mediaMagic {
		return false
	}
	if n < len(fixed) {
		return true
	}
	return int64(binary.LittleEndian.Uint32(fixed[8:])) > size
}
