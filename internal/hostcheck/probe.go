package hostcheck

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"

	"github.com/backupcycle/backupcycle/internal/mssql"
	"github.com/backupcycle/backupcycle/internal/storage"
	"github.com/backupcycle/backupcycle/internal/tsql"
)

// ProbePrefix starts the name of the file Probe writes. It carries no '@',
// so no manifest or stripe pattern of the product ever matches it.
const ProbePrefix = "backupcycle-probe-"

// probeBytes is the probe's size: a few blocks, not a backup.
const probeBytes = 4 << 10

// ErrNotSeen: SQL Server does not find, through one of its paths, the file
// the worker wrote through location.
var ErrNotSeen = errors.New("SQL Server does not see the worker's probe file")

// ErrNotWritten: the worker could not write the probe through location;
// nothing was asked of SQL Server.
var ErrNotWritten = errors.New("write the probe file")

// HeaderOnly is RESTORE HEADERONLY of one file on the instance (an
// *mssql.DB's HeaderOnly with tsql.RestoreHeaderOnly).
type HeaderOnly func(ctx context.Context, path string) error

// Probe checks that paths (how SQL Server reaches a backup server) and st
// (how the worker reaches it, its location) are the same directory before
// a BACKUP writes there: an unmounted mount point is an empty local
// directory on the SQL host, and a BACKUP into it fills that host's disk
// while the worker sees nothing. The worker writes a small file through
// st and SQL Server reads its header through each path (RESTORE
// HEADERONLY, which the source's login may run: it needs CREATE DATABASE,
// as the cycle does to recognise a finished BACKUP). A file SQL Server
// finds is not a backup and it says so (3241 "incorrectly formed"); a file
// it does not find is operating system error 2 or 3: ErrNotSeen, naming the
// path. The file is removed whatever happens. Another failure (an
// unreachable share) is returned as it is: it proves nothing about the
// paths, and the BACKUP meets it with its own error.
func Probe(ctx context.Context, st storage.Storage, paths []string, read HeaderOnly) error {
	var raw [8]byte
	_, _ = rand.Read(raw[:])
	name := ProbePrefix + hex.EncodeToString(raw[:]) + ".tmp"
	data := make([]byte, probeBytes)
	_, _ = rand.Read(data)
	w, err := st.Create(ctx, name)
	if err != nil {
		return fmt.Errorf("%w %s in %s: %w", ErrNotWritten, name, st.Location(), err)
	}
	// A context already cancelled must not leave the probe behind.
	defer func() { _ = st.Remove(context.WithoutCancel(ctx), name) }()
	if _, err := w.WriteAt(data, 0); err != nil {
		_ = w.Close()
		return fmt.Errorf("%w %s in %s: %w", ErrNotWritten, name, st.Location(), err)
	}
	if err := w.Close(); err != nil {
		return fmt.Errorf("%w %s in %s: %w", ErrNotWritten, name, st.Location(), err)
	}
	for _, p := range paths {
		full := tsql.JoinPath(p, name)
		err := read(ctx, full)
		switch {
		case err == nil, errors.Is(err, mssql.ErrCorruptBackup) && !mssql.MissingFile(err):
			// Found, and (rightly) not a backup.
		case mssql.MissingFile(err), errors.Is(err, mssql.ErrBackupPathInvalid):
			return fmt.Errorf("%w: the worker wrote %s in %s, and SQL Server does not find it as %s (%s)", ErrNotSeen, name, st.Location(), full, sqlMessage(err))
		default:
			return err
		}
	}
	return nil
}

// sqlMessage is what SQL Server said, without the classification's words
// (a probe that is not found is no "corrupt backup set").
func sqlMessage(err error) string {
	var f *mssql.Failure
	if errors.As(err, &f) && len(f.Errors) > 0 {
		return fmt.Sprintf("%s, error %d", f.Errors[0].Message, f.Errors[0].Number)
	}
	return err.Error()
}
