package sqlsim

import (
	"fmt"
	"os"
	"testing"
)

// benchSize is the database the benchmarks back up and restore (1 GiB of
// data files, 4 files, plus the log).
const benchSize = 1 << 30

func benchEnv(b *testing.B) (*testEnv, int64) {
	b.Helper()
	e := newEnv(b)
	e.create(b, DatabaseSpec{Name: "Big", Size: benchSize, DataFiles: 4})
	var bytes int64
	for _, f := range e.in.lookupDB("Big").Files {
		bytes += f.Pages * PageSize
	}
	return e, bytes
}

// BenchmarkBackup: BACKUP DATABASE of 1 GiB to 1, 2 and 4 stripes on local
// disk, with and without compression; MB/s is database bytes per second.
func BenchmarkBackup(b *testing.B) {
	e, size := benchEnv(b)
	for _, compression := range []bool{false, true} {
		for _, n := range []int{1, 2, 4} {
			b.Run(fmt.Sprintf("stripes=%d/compression=%v", n, compression), func(b *testing.B) {
				stmt := "BACKUP DATABASE [Big] TO " + disks(stripeNames("Big", n)) + " WITH CHECKSUM, INIT, FORMAT, MAXTRANSFERSIZE = 4194304, BUFFERCOUNT = 16, STATS = 10"
				if compression {
					stmt += ", COMPRESSION"
				}
				b.SetBytes(size)
				for b.Loop() {
					mustRun(b, e.db, stmt)
				}
				b.StopTimer()
				var stored int64
				for _, p := range stripeNames("Big", n) {
					if st, err := os.Stat(localStripe(e, p)); err == nil {
						stored += st.Size()
					}
				}
				b.ReportMetric(float64(size)/float64(stored), "ratio")
				for _, p := range stripeNames("Big", n) {
					os.Remove(localStripe(e, p))
				}
			})
		}
	}
}

// BenchmarkBackupToNul: BACKUP DATABASE of 1 GiB TO DISK = 'NUL': reading,
// page checksums and (optionally) compression, without the stripe writes.
func BenchmarkBackupToNul(b *testing.B) {
	e, size := benchEnv(b)
	for _, compression := range []bool{false, true} {
		b.Run(fmt.Sprintf("compression=%v", compression), func(b *testing.B) {
			stmt := "BACKUP DATABASE [Big] TO DISK = 'NUL' WITH CHECKSUM, COPY_ONLY, MAXTRANSFERSIZE = 4194304, STATS = 10"
			if compression {
				stmt += ", COMPRESSION"
			}
			b.SetBytes(size)
			for b.Loop() {
				mustRun(b, e.db, stmt)
			}
		})
	}
}

// BenchmarkRestore: RESTORE DATABASE WITH CHECKSUM of the 1 GiB set (4
// stripes), uncompressed and compressed.
func BenchmarkRestore(b *testing.B) {
	e, size := benchEnv(b)
	for _, compression := range []bool{false, true} {
		b.Run(fmt.Sprintf("stripes=4/compression=%v", compression), func(b *testing.B) {
			stmt := "BACKUP DATABASE [Big] TO " + disks(stripeNames("Big", 4)) + " WITH CHECKSUM, INIT, FORMAT, MAXTRANSFERSIZE = 4194304"
			if compression {
				stmt += ", COMPRESSION"
			}
			mustRun(b, e.db, stmt)
			from := disks(stripeNames("Big", 4))
			r := mustRun(b, e.db, "RESTORE FILELISTONLY FROM "+from)
			moves := ""
			for _, row := range r.rows {
				moves += fmt.Sprintf("MOVE %s TO %s, ", ql(row[0].(string)), ql(fmt.Sprintf(`R:\restore\bench_%d.dat`, asInt(row[6]))))
			}
			restore := "RESTORE DATABASE [BigCopy] FROM " + from + " WITH " + moves + "CHECKSUM, REPLACE, RECOVERY"
			b.SetBytes(size)
			for b.Loop() {
				mustRun(b, e.db, restore)
			}
		})
	}
}

// BenchmarkCheckDB: DBCC CHECKDB of the 1 GiB database.
func BenchmarkCheckDB(b *testing.B) {
	e, size := benchEnv(b)
	b.SetBytes(size)
	for b.Loop() {
		mustRun(b, e.db, "DBCC CHECKDB([Big]) WITH NO_INFOMSGS, ALL_ERRORMSGS")
	}
}

// BenchmarkCompressBlock: deflate of one 4 MiB block of generated pages on
// one core (what COMPRESSION costs per worker).
func BenchmarkCompressBlock(b *testing.B) {
	raw := make([]byte, 4<<20)
	for i := 0; i < len(raw)/PageSize; i++ {
		fillDataPage(raw[i*PageSize:(i+1)*PageSize], 1, uint32(i), 5, 100)
	}
	var c compressor
	var n int
	b.SetBytes(int64(len(raw)))
	for b.Loop() {
		z, err := c.compress(raw)
		if err != nil {
			b.Fatal(err)
		}
		n = len(z)
	}
	b.ReportMetric(float64(len(raw))/float64(n), "ratio")
}
