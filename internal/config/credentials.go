package config

import (
	"fmt"

	"github.com/backupcycle/backupcycle/internal/storage"
)

// Credentials are the SMB credentials of the backup server, the password
// reference resolved now (zero for a local directory). Every opener of a
// backup server (the cycle, preflight, status) takes them from here.
func (b *BackupServer) Credentials() (storage.Credentials, error) {
	if b.SMB == nil {
		return storage.Credentials{}, nil
	}
	creds := storage.Credentials{User: b.SMB.User, Domain: b.SMB.Domain}
	if !b.SMB.Password.IsZero() {
		pw, err := ResolveSecret(b.SMB.Password)
		if err != nil {
			return storage.Credentials{}, fmt.Errorf("SMB password of backup server %s: %w", b.Name, err)
		}
		creds.Password = pw
	}
	return creds, nil
}
