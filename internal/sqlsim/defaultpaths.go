package sqlsim

import (
	"os"
	"path/filepath"
)

// What a restore to a new home needs of an instance beyond the cycle's
// verification restore: where it puts a database's files by default, and
// the data transfer options of RESTORE.

// defaultPathProperty is SERVERPROPERTY('InstanceDefaultDataPath') and
// ('InstanceDefaultLogPath'): "Name of the default path to the instance
// data files" and "... log files", nvarchar(512), with a trailing
// separator ("SERVERPROPERTY (Transact-SQL)",
// https://learn.microsoft.com/sql/t-sql/functions/serverproperty-transact-sql;
// SQL Server 2012 and later). The emulator's is the directory CREATE
// DATABASE writes to, for both. name is lower case; ok is false for other
// properties.
func (in *Instance) defaultPathProperty(name string) (any, bool) {
	switch name {
	case "instancedefaultdatapath", "instancedefaultlogpath":
		return filepath.Join(in.cfg.DataDir, "data") + string(os.PathSeparator), true
	}
	return nil, false
}

// restoreTransfer checks RESTORE's data transfer options: "BUFFERCOUNT =
// { buffercount | @buffercount_variable } Specifies the total number of
// I/O buffers to be used for the restore operation" and "MAXTRANSFERSIZE
// ... the largest unit of transfer in bytes to be used between the backup
// media and SQL Server. The possible values are multiples of 65536 bytes
// (64 KB) ranging up to 4194304 bytes (4 MB)" ("RESTORE Statements -
// Arguments", Data Transfer Options,
// https://learn.microsoft.com/sql/t-sql/statements/restore-statements-arguments-transact-sql).
// A value out of range is 3250, as for BACKUP; buffers beyond the memory
// SQL Server can give are 701 (seed 004), as for BACKUP.
func (x *execCtx) restoreTransfer(s *restoreStmt, op string) error {
	_, bc := s.opts["BUFFERCOUNT"]
	_, mts := s.opts["MAXTRANSFERSIZE"]
	if !bc && !mts {
		return nil
	}
	maxTransfer, err := x.intOpt(s.opts, "MAXTRANSFERSIZE", 1<<20)
	if err != nil {
		return err
	}
	if maxTransfer < 64<<10 || maxTransfer > 4<<20 || maxTransfer%(64<<10) != 0 {
		return opError(op, errRange(maxTransfer, "MAXTRANSFERSIZE"))
	}
	buffers, err := x.intOpt(s.opts, "BUFFERCOUNT", 6)
	if err != nil {
		return err
	}
	if buffers < 1 {
		return opError(op, errRange(buffers, "BUFFERCOUNT"))
	}
	if int64(buffers)*int64(maxTransfer) > x.in.cfg.MemoryBudget {
		return opError(op, errMemory())
	}
	return nil
}
