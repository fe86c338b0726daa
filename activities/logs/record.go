package logs

import (
	"context"
	"fmt"

	"github.com/backupcycle/backupcycle/activities"
	"github.com/backupcycle/backupcycle/internal/catalog"
	"github.com/backupcycle/backupcycle/internal/config"
	"github.com/backupcycle/backupcycle/internal/storage"
)

// The chain record on the backup server that holds the chain (the
// rotation's first server: LogPlan.Server) is what every step reads and
// writes; the workflow's cursor is a hint only.

// chainServer is the backup server the database's log backups go to.
func chainServer(db *config.Database) string { return db.BackupServers[0] }

// newest is the newest part of the newest chain of db in the directory,
// nil when the database has no chain there. A record that is not trusted
// (no manifest key signed it) or cannot be read stops the step: the chain
// is not continued over a record it cannot believe, and the error names
// the file.
func newest(ctx context.Context, fsys catalog.FS, keys *catalog.Keys, db *config.Database, server string) (*catalog.ChainRecord, error) {
	l, err := catalog.ListChains(ctx, fsys, keys, catalog.Of(db.Instance, db.Name))
	if err != nil {
		return nil, activities.StorageError(server, err)
	}
	for name, berr := range l.Broken {
		return nil, activities.NonRetryable(activities.ErrInvalidConfig, fmt.Errorf(
			"log chain record %s on %s cannot be read (%v): move it aside for a person to look at; the chain goes on with the next record", name, server, berr))
	}
	if len(l.Records) == 0 {
		return nil, nil
	}
	r := l.Records[len(l.Records)-1]
	if !r.Trusted() {
		return nil, activities.NonRetryable(activities.ErrInvalidConfig, fmt.Errorf(
			"log chain record %s on %s is not trusted (%s): a chain is only continued over a record a manifest key signed", r.FileName(), server, r.Auth.Why()))
	}
	return r, nil
}

// save writes the record, signed.
func save(ctx context.Context, d *activities.CycleDeps, fsys catalog.FS, server string, r *catalog.ChainRecord) error {
	keys, err := d.ManifestKeys()
	if err != nil {
		return err
	}
	r.UpdatedAt = d.Clock().UTC()
	if err := catalog.SaveChain(ctx, fsys, keys, r); err != nil {
		return activities.StorageError(server, err)
	}
	return nil
}

// hashFile is the size and SHA-256 (lower-case hex) of a file on st.
func hashFile(ctx context.Context, st storage.Storage, name string) (int64, string, error) {
	return activities.HashFile(ctx, st, name)
}
