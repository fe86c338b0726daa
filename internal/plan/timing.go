package plan

import (
	"errors"
	"fmt"
	"math"
	"time"
)

// MiB is the seed's "MB": its formulas multiply GB by 1024.
const MiB = 1 << 20

// Hardware is the measured sustained sequential throughput of the parts of
// the path, per unit, and how many units work in parallel (seed 000,
// "Calculating the Time...": "this should result in 5 values ... always use
// the slowest result"). All throughputs are MB/s per unit.
type Hardware struct {
	NICMBps float64 // network adapter throughput, per NIC
	NICs    int     // NICs used for the backup (one UNC path each)

	BackupLUNReadMBps  float64 // backup file server LUN, sequential read
	BackupLUNWriteMBps float64 // backup file server LUN, sequential write
	BackupLUNs         int     // LUNs holding backup files, in parallel

	DataLUNReadMBps  float64 // database data LUN, sequential read
	DataLUNWriteMBps float64 // database data LUN, sequential write
	DataLUNs         int     // LUNs holding database files, in parallel
}

// NetworkMBps = NICThroughput x NumberOfNICsUsed.
func (h Hardware) NetworkMBps() float64 { return h.NICMBps * float64(h.NICs) }

// FileReadMBps = BackupLUNReadPerformance x NumberOfLUNsUsed.
func (h Hardware) FileReadMBps() float64 { return h.BackupLUNReadMBps * float64(h.BackupLUNs) }

// FileWriteMBps = BackupLUNWritePerformance x NumberOfLUNsUsed.
func (h Hardware) FileWriteMBps() float64 { return h.BackupLUNWriteMBps * float64(h.BackupLUNs) }

// DatabaseReadMBps = DataLUNReadPerformance x NumberOfLUNsUsed.
func (h Hardware) DatabaseReadMBps() float64 { return h.DataLUNReadMBps * float64(h.DataLUNs) }

// DatabaseWriteMBps = DataLUNWritePerformance x NumberOfLUNsUsed. (The seed's
// text multiplies the data LUN *read* figure here, an evident slip: a restore
// writes.)
func (h Hardware) DatabaseWriteMBps() float64 { return h.DataLUNWriteMBps * float64(h.DataLUNs) }

func (h Hardware) validate() error {
	for _, v := range []struct {
		name string
		val  float64
	}{
		{"NIC throughput", h.NICMBps}, {"backup LUN read throughput", h.BackupLUNReadMBps},
		{"backup LUN write throughput", h.BackupLUNWriteMBps}, {"data LUN read throughput", h.DataLUNReadMBps},
		{"data LUN write throughput", h.DataLUNWriteMBps},
	} {
		if !(v.val > 0) || math.IsInf(v.val, 0) {
			return fmt.Errorf("plan: %s is %v MB/s; give the measured sustained throughput (> 0)", v.name, v.val)
		}
	}
	for _, v := range []struct {
		name string
		n    int
	}{{"NICs", h.NICs}, {"backup LUNs", h.BackupLUNs}, {"data LUNs", h.DataLUNs}} {
		if v.n < 1 {
			return fmt.Errorf("plan: number of %s is %d; it must be at least 1", v.name, v.n)
		}
	}
	return nil
}

// Workload is what is being backed up.
type Workload struct {
	// DataBytes is the uncompressed size of the backup: DatabaseSize = space
	// used in data files + size of the transaction log (seed 000).
	DataBytes int64
	// CompressionFactor = BackupFileSizeUncompressed / BackupFileSizeCompressed;
	// 1 without compression (0 is taken as 1). Seed 000 "Backup Compression":
	// 4 to 6 for most databases.
	CompressionFactor float64
	// InstantFileInit: SQL Server may skip zeroing data files (Perform Volume
	// Maintenance Tasks right). See FileInitFactor.
	InstantFileInit bool
}

func (w Workload) cf() float64 {
	if w.CompressionFactor == 0 {
		return 1
	}
	return w.CompressionFactor
}

// FileInitFactor divides the database write throughput during a restore.
// Without instant file initialization SQL Server first zeroes every data file
// and then writes the restored pages, so each byte is written twice (factor
// 2); with it, once (factor 1). The extracted text of seed 000 is garbled at
// this point ("FileInitFactor is equal to the compression factor"); this is
// our reading of it, stated so that it can be checked.
func (w Workload) FileInitFactor() float64 {
	if w.InstantFileInit {
		return 1
	}
	return 2
}

func (w Workload) validate() error {
	if w.DataBytes < 0 {
		return fmt.Errorf("plan: data size %d bytes is negative", w.DataBytes)
	}
	if cf := w.cf(); !(cf >= 1) || math.IsInf(cf, 0) {
		return fmt.Errorf("plan: compression factor %v must be >= 1 (uncompressed size / compressed size; 1 without compression)", w.CompressionFactor)
	}
	return nil
}

// Rate is a throughput together with the part of the path that limits it.
type Rate struct {
	MBps       float64
	Bottleneck string // "database read", "network", "backup file write", ...
}

func minRate(rs ...Rate) Rate {
	best := rs[0]
	for _, r := range rs[1:] {
		if r.MBps < best.MBps {
			best = r
		}
	}
	return best
}

// BackupRate (seed 000):
//
//	BackupPerformance = min(DatabaseReadPerformance,
//	                        NetworkPerformance x CompressionFactor,
//	                        FileWritePerformance x CompressionFactor)
//
// in MB/s of database data. Compression multiplies the network and write
// terms because fewer bytes cross them; the CPU cost of compressing is not
// modelled (the seed notes it may become the limit).
func BackupRate(h Hardware, w Workload) Rate {
	cf := w.cf()
	return minRate(
		Rate{h.DatabaseReadMBps(), "database read"},
		Rate{h.NetworkMBps() * cf, "network"},
		Rate{h.FileWriteMBps() * cf, "backup file write"},
	)
}

// RestoreRate (seed 000):
//
//	RestorePerformance = min(DatabaseWritePerformance / FileInitFactor,
//	                         NetworkPerformance x CompressionFactor,
//	                         FileReadPerformance x CompressionFactor)
func RestoreRate(h Hardware, w Workload) Rate {
	cf := w.cf()
	return minRate(
		Rate{h.DatabaseWriteMBps() / w.FileInitFactor(), "database write"},
		Rate{h.NetworkMBps() * cf, "network"},
		Rate{h.FileReadMBps() * cf, "backup file read"},
	)
}

// LocalRestoreRate is the restore on the backup server itself, from its own
// disks (seed 000, "Local Restore Time"): no network term.
//
//	min(DatabaseWritePerformance / FileInitFactor, FileReadPerformance x CompressionFactor)
func LocalRestoreRate(h Hardware, w Workload) Rate {
	return minRate(
		Rate{h.DatabaseWriteMBps() / w.FileInitFactor(), "database write"},
		Rate{h.FileReadMBps() * w.cf(), "backup file read"},
	)
}

// durationFor is Size[GB] x 1024 / Performance[MB/s] (seed: "/ 60" for
// minutes; here a time.Duration).
func durationFor(bytes int64, mbps float64) time.Duration {
	if bytes == 0 {
		return 0
	}
	sec := float64(bytes) / MiB / mbps
	return time.Duration(sec * float64(time.Second))
}

// BackupTime = BackupFileSize[GB] x 1024 / BackupPerformance[MB/s] (seed 000).
func BackupTime(h Hardware, w Workload) (time.Duration, Rate, error) {
	if err := errors.Join(h.validate(), w.validate()); err != nil {
		return 0, Rate{}, err
	}
	r := BackupRate(h, w)
	return durationFor(w.DataBytes, r.MBps), r, nil
}

// RestoreTime = BackupFileSize[GB] x 1024 / RestorePerformance[MB/s] (seed 000).
func RestoreTime(h Hardware, w Workload) (time.Duration, Rate, error) {
	if err := errors.Join(h.validate(), w.validate()); err != nil {
		return 0, Rate{}, err
	}
	r := RestoreRate(h, w)
	return durationFor(w.DataBytes, r.MBps), r, nil
}

// CheckDBTime = BackupFileSize[GB] x 1024 / DataLUNReadPerformance[MB/s]
// (seed 000; read with all data LUNs in parallel). A lower bound: "CHECKDB
// might require much more than just the time it takes to read from the disk".
func CheckDBTime(h Hardware, w Workload) (time.Duration, error) {
	if err := errors.Join(h.validate(), w.validate()); err != nil {
		return 0, err
	}
	return durationFor(w.DataBytes, h.DatabaseReadMBps()), nil
}

// Cycle describes the whole verified cycle as this product runs it: backup
// from the SQL host to the primary backup server over its NICs, copy of the
// (compressed) files to the remote backup server, restore there from its own
// disks, CHECKDB there.
type Cycle struct {
	Source   Hardware // SQL host -> primary backup server
	Remote   Hardware // remote backup server with its verification instance
	CopyMBps float64  // primary -> remote copy throughput (inter-site link, source read, remote write: the slowest)
	Workload Workload
}

// CycleEstimate is the predicted duration of each step.
type CycleEstimate struct {
	Backup, Copy, Restore, CheckDB, Total time.Duration
	BackupRate, RestoreRate               Rate
}

// CycleTime extends the seed's
//
//	BackupCycleTime = BackupTime + LocalRestoreTime + CheckDBTime
//
// with the copy to the remote site (seed step 2, "Copy the files to a remote
// location"): Copy = (DataBytes / CompressionFactor) / CopyMBps. The restore
// is local to the remote backup server (LocalRestoreRate on Remote) and so is
// CHECKDB (CheckDBTime on Remote).
func CycleTime(c Cycle) (CycleEstimate, error) {
	if err := errors.Join(c.Source.validate(), c.Remote.validate(), c.Workload.validate()); err != nil {
		return CycleEstimate{}, err
	}
	if !(c.CopyMBps > 0) || math.IsInf(c.CopyMBps, 0) {
		return CycleEstimate{}, fmt.Errorf("plan: copy throughput %v MB/s; give the measured primary-to-remote throughput (> 0)", c.CopyMBps)
	}
	var e CycleEstimate
	e.BackupRate = BackupRate(c.Source, c.Workload)
	e.Backup = durationFor(c.Workload.DataBytes, e.BackupRate.MBps)
	e.Copy = durationFor(int64(float64(c.Workload.DataBytes)/c.Workload.cf()), c.CopyMBps)
	e.RestoreRate = LocalRestoreRate(c.Remote, c.Workload)
	e.Restore = durationFor(c.Workload.DataBytes, e.RestoreRate.MBps)
	e.CheckDB = durationFor(c.Workload.DataBytes, c.Remote.DatabaseReadMBps())
	e.Total = e.Backup + e.Copy + e.Restore + e.CheckDB
	return e, nil
}

// GrowLinear is the seed's BackupFileSize = DatabaseSize + ExpectedGrowthPerYear x Years,
// plus the recommended safety buffer (seed: "always add at least 10 percent").
func GrowLinear(sizeBytes, growthPerYearBytes int64, years, safety float64) int64 {
	return int64((float64(sizeBytes) + float64(growthPerYearBytes)*years) * (1 + safety))
}

// GrowRelative is the seed's BackupFileSize = DatabaseSize x (1 + Growth%/100)^Years,
// plus the safety buffer.
func GrowRelative(sizeBytes int64, growthPercentPerYear, years, safety float64) int64 {
	return int64(float64(sizeBytes) * math.Pow(1+growthPercentPerYear/100, years) * (1 + safety))
}
