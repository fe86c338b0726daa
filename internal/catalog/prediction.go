package catalog

import "time"

// RecoveryPrediction is what each step of a restore was predicted to take
// before it ran (plan.PredictRecovery), and what from: the bytes of its
// backups and the rates known then, each with where it came from ("cycle":
// a verified set's step timings, "calibration", "drill": the newest drill
// that measured it, "assumed"). A step it does not predict is 0.
type RecoveryPrediction struct {
	Full     time.Duration `json:"full"`
	Diff     time.Duration `json:"diff,omitempty"`
	Logs     time.Duration `json:"logs,omitempty"`
	Recovery time.Duration `json:"recovery,omitempty"`
	// CheckDB is a CHECKDB of the restored copy at the measured rate: a
	// drill with drill.checkdb compares its checks with it.
	CheckDB time.Duration `json:"checkdb,omitempty"`

	// FullBytes and DiffBytes are the data restored (BackupSize), LogCount
	// and LogBytes the log backups and their file bytes.
	FullBytes int64 `json:"full_bytes,omitempty"`
	DiffBytes int64 `json:"diff_bytes,omitempty"`
	LogCount  int   `json:"log_count,omitempty"`
	LogBytes  int64 `json:"log_bytes,omitempty"`
	// RestoreMBps is RESTORE DATABASE's rate; LogOverhead each RESTORE
	// LOG's cost whatever its size and LogMBps the rate of its bytes;
	// CheckDBMBps CHECKDB's. RecoveryFrom says where Recovery came from.
	RestoreMBps  float64       `json:"restore_mbps,omitempty"`
	RestoreFrom  string        `json:"restore_from,omitempty"`
	LogOverhead  time.Duration `json:"log_overhead,omitempty"`
	LogMBps      float64       `json:"log_mbps,omitempty"`
	LogFrom      string        `json:"log_from,omitempty"`
	CheckDBMBps  float64       `json:"checkdb_mbps,omitempty"`
	CheckDBFrom  string        `json:"checkdb_from,omitempty"`
	RecoveryFrom string        `json:"recovery_from,omitempty"`
}

// Restore is the predicted time from the full's RESTORE to the database
// online: full, differential, logs and recovery.
func (p *RecoveryPrediction) Restore() time.Duration {
	if p == nil {
		return 0
	}
	return p.Full + p.Diff + p.Logs + p.Recovery
}

// Prediction steps, as StepError names them.
const (
	PredictFull     = "full"
	PredictDiff     = "diff"
	PredictLogs     = "logs"
	PredictRecovery = "recovery"
	PredictCheckDB  = "checkdb"
	// PredictRestore is the predicted steps together.
	PredictRestore = "restore"
)

// StepError is one step's measured time against its prediction: Error
// is measured - predicted (positive: slower than predicted), Ratio
// measured / predicted (1: exact; 0 when nothing was predicted).
type StepError struct {
	Step      string        `json:"step"`
	Predicted time.Duration `json:"predicted"`
	Measured  time.Duration `json:"measured"`
	Error     time.Duration `json:"error"`
	Ratio     float64       `json:"ratio,omitempty"`
}

// PredictionErrors sets each step p predicted beside what the drill
// measured: the full, the differential (when one was predicted or
// restored), the logs (when any were predicted), the recovery (when
// predicted), CHECKDB (against the checks, when it ran) and the restore
// as a whole (the steps compared, together). Nil without a prediction.
func PredictionErrors(p *RecoveryPrediction, steps DrillStepTimes, checkdb bool) []StepError {
	if p == nil {
		return nil
	}
	var out []StepError
	var pred, meas time.Duration
	add := func(step string, predicted, measured time.Duration, restore bool) {
		e := StepError{Step: step, Predicted: predicted, Measured: measured, Error: measured - predicted}
		if predicted > 0 {
			e.Ratio = float64(measured) / float64(predicted)
		}
		out = append(out, e)
		if restore {
			pred, meas = pred+predicted, meas+measured
		}
	}
	add(PredictFull, p.Full, steps.Full, true)
	if p.Diff > 0 || steps.Diff > 0 {
		add(PredictDiff, p.Diff, steps.Diff, true)
	}
	if p.LogCount > 0 {
		add(PredictLogs, p.Logs, steps.Logs, true)
	}
	if p.Recovery > 0 {
		add(PredictRecovery, p.Recovery, steps.Recovery, true)
	}
	if checkdb && p.CheckDB > 0 {
		add(PredictCheckDB, p.CheckDB, steps.Checks, false)
	}
	add(PredictRestore, pred, meas, false)
	return out
}

// ErrorOf is the StepError of step in errs (false: not predicted).
func ErrorOf(errs []StepError, step string) (StepError, bool) {
	for _, e := range errs {
		if e.Step == step {
			return e, true
		}
	}
	return StepError{}, false
}
