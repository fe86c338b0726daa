// Package plan holds the planning arithmetic of the backup cycle, taken from
// seed 000 ("A Case Study: Fast and Reliable Backup and Restore of a VLDB over
// the Network"): the time formulas of "Calculating the Time to Back Up and
// Restore a Database", the balanced file counts of "Recommendations for the
// Total Number of Files to Use" (Table 2), the memory guard of seed 004
// (memory = BUFFERCOUNT x MAXTRANSFERSIZE), and the round-robin choice of the
// primary backup server ("Handling Backup Server Failure", figure 2). From
// the time formulas it derives the cycle's step timeouts (Timeouts: a
// multiple of the expected duration plus a floor, with configured
// overrides), and it knows which editions create compressed backups.
// Where a database's verified cycles (or a calibration) measured a step's
// throughput, the estimates use it instead of the assumption (measured.go).
//
// Everything here is pure: no I/O, no clock. Units follow the seed: sizes in
// MB where 1 GB = 1024 MB (binary), throughput in MB/s.
package plan
