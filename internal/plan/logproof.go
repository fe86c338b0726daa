package plan

import "fmt"

// Proof modes of the log chain (config.LogProofStandby, LogProofNightly).
const (
	proofStandby = "standby"
	proofNightly = "nightly"
)

// ProofSpace is what a database's copies take on its verification
// instance at their peak: Copies copies of its allocated data and log size
// (sys.master_files) at once. Assumption says why, for people.
type ProofSpace struct {
	Mode        string `json:"mode,omitempty"` // log_proof: standby, nightly; "" without log backups
	Copies      int    `json:"copies"`
	DataBytes   int64  `json:"data_bytes"` // per copy
	LogBytes    int64  `json:"log_bytes"`  // per copy
	Assumption  string `json:"assumption"`
	PeakBytes   int64  `json:"peak_bytes"` // Copies x (DataBytes + LogBytes)
	Permanently bool   `json:"permanently,omitempty"`
}

// ProofSpaceOf is the verification instance's peak need for a database of
// dataBytes + logBytes allocated, given its log proof mode and whether the
// cycle's copy is kept (keep_verify_db):
//
//   - no log backups: the cycle's copy, during the cycle (kept after it
//     with keep_verify_db);
//   - standby: the standby copy stays restored WITH STANDBY all the time
//     ("RESTORE Statements - Arguments", STANDBY: the database stays
//     read-only between log restores), so every cycle's copy is restored
//     beside it: two copies, one of them permanently (the standby file of
//     undo pages comes on top; it is small next to the copy);
//   - nightly: the scratch copy exists only while the proof runs. It is
//     assumed to run apart from the database's own cycle, so one copy at
//     a time, unless keep_verify_db keeps the cycle's copy, beside which
//     the proof's copy then needs room: two.
func ProofSpaceOf(mode string, keepVerifyDB bool, dataBytes, logBytes int64) ProofSpace {
	s := ProofSpace{Mode: mode, Copies: 1, DataBytes: dataBytes, LogBytes: logBytes, Permanently: keepVerifyDB}
	switch {
	case mode == proofStandby:
		s.Copies, s.Permanently = 2, true
		s.Assumption = "the standby copy stays restored beside the cycle's copy: room for both at once, permanently"
	case mode == proofNightly && keepVerifyDB:
		s.Copies = 2
		s.Assumption = "keep_verify_db keeps the cycle's copy, and the nightly proof restores its scratch copy beside it: room for both during the proof"
	case mode == proofNightly:
		s.Assumption = "the nightly proof's scratch copy is assumed restored when the database's cycle is not restoring (scheduled apart): room for one copy at a time"
	case keepVerifyDB:
		s.Assumption = "keep_verify_db keeps the cycle's copy after the cycle"
	default:
		s.Assumption = "the cycle's copy, during the cycle"
	}
	s.PeakBytes = int64(s.Copies) * (dataBytes + logBytes)
	return s
}

// String is the need for people.
func (s ProofSpace) String() string {
	what := "1 copy"
	if s.Copies > 1 {
		what = fmt.Sprintf("%d copies", s.Copies)
	}
	if s.Mode != "" {
		what += " (log_proof " + s.Mode + ")"
	}
	return fmt.Sprintf("%s of %s each: %s; %s", what, FormatBytes(s.DataBytes+s.LogBytes), FormatBytes(s.PeakBytes), s.Assumption)
}
