package plan

import "strings"

// SERVERPROPERTY('EngineEdition') values of the on-premises editions
// (https://learn.microsoft.com/sql/t-sql/functions/serverproperty-transact-sql):
// Standard also stands for Web and Business Intelligence, Enterprise for
// Developer and Evaluation.
const (
	EngineStandard   = 2
	EngineEnterprise = 3
	EngineExpress    = 4
)

// CompressionSupported reports whether an instance of this edition creates
// compressed backups, and whether that is known. "Backup compression is
// supported on SQL Server editions: Enterprise, Standard, and Developer"
// (https://learn.microsoft.com/sql/relational-databases/backup-restore/backup-compression-sql-server;
// the 2016-2022 "Editions and supported features" pages list it as not
// available in Web and Express). Express has an engine edition of its own;
// Web shares Standard's, so the edition name tells them apart. An edition
// not read (engineEdition 0) is unknown: the configured setting is sent.
func CompressionSupported(engineEdition int, edition string) (supported, known bool) {
	switch {
	case engineEdition == EngineExpress || strings.Contains(strings.ToLower(edition), "express"):
		return false, true
	case strings.HasPrefix(strings.ToLower(strings.TrimSpace(edition)), "web"):
		return false, true
	case engineEdition == EngineStandard || engineEdition == EngineEnterprise:
		return true, true
	}
	return true, false
}

// BackupEncryptionSupported reports whether an instance of this edition
// creates encrypted backups (BACKUP ... WITH ENCRYPTION), and whether that
// is known: the editions of backup compression, since "SQL Server Express
// and SQL Server Web don't support encryption during backup. However
// restoring from an encrypted backup to an instance of SQL Server Express
// or SQL Server Web is supported" ("Backup encryption",
// https://learn.microsoft.com/sql/relational-databases/backup-restore/backup-encryption).
func BackupEncryptionSupported(engineEdition int, edition string) (supported, known bool) {
	return CompressionSupported(engineEdition, edition)
}
