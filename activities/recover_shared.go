package activities

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"

	"github.com/backupcycle/backupcycle/internal/catalog"
	"github.com/backupcycle/backupcycle/internal/config"
	"github.com/backupcycle/backupcycle/internal/mssql"
	"github.com/backupcycle/backupcycle/internal/storage"
)

// The helpers the recover activities (package activities/recover) share
// with the cycle's and the log chain's, exported as functions (an exported
// method of Activities would be registered as an activity).

// HashFile is the size and SHA-256 (lower-case hex) of a file on st, read
// through.
func HashFile(ctx context.Context, st storage.Storage, name string) (int64, string, error) {
	r, err := st.OpenRead(ctx, name)
	if err != nil {
		return 0, "", err
	}
	defer r.Close()
	h := sha256.New()
	buf := make([]byte, 1<<20)
	var off int64
	for {
		n, err := r.ReadAt(buf, off)
		h.Write(buf[:n])
		off += int64(n)
		if errors.Is(err, io.EOF) || n == 0 && err == nil {
			break
		}
		if err != nil {
			return 0, "", err
		}
	}
	return off, hex.EncodeToString(h.Sum(nil)), nil
}

// DatabaseState reads name's row of sys.databases with the login's SID and
// the server's GETDATE() (nil: no such database), failures classified.
func DatabaseState(ctx context.Context, sqlDB *mssql.DB, name string) (*mssql.DatabaseState, error) {
	return databaseState(ctx, sqlDB, name)
}

// LastRestore reads the newest full restore into name (nil: none),
// failures classified.
func LastRestore(ctx context.Context, sqlDB *mssql.DB, name string) (*mssql.RestoreProof, error) {
	return lastRestoreProof(ctx, sqlDB, name)
}

// RecordedAfter reports whether msdb recorded restore last after the
// RESTORE v records was about to be sent (by restore_history_id when v has
// msdb's newest then; see recordedAfter).
func RecordedAfter(v *catalog.VerifyCopy, last *mssql.RestoreProof) bool {
	return recordedAfter(v, last)
}

// SameGUID compares backup set GUIDs as SQL Server does (case-insensitively).
func SameGUID(a, b string) bool { return sameGUID(a, b) }

// ClockSlack absorbs datetime's rounding between two values one instance
// reported (GETDATE() as read, a create_date or restore_date it stamped).
const ClockSlack = clockSlack

// SetsOf is what names db's sets on the backup servers: its instance key
// and the group's aliases, the entry it was configured under.
func SetsOf(db *config.Database) catalog.DB { return setsOf(db) }
