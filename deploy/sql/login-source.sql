-- The worker's login on sql-primary, the source: exactly the grants `starter preflight` checks (README "Permissions"),
-- never sysadmin. Run by the one-shot compose service source-login, as sa, with the SQL Server image's own sqlcmd
-- (-b: the first error stops it). Idempotent: a second run sets the password and grants nothing new.
:r /backupcycle/sql/login.sql

-- BACKUP DATABASE of Sales (deploy/config.compose.yaml backs up Sales; demo-database created it).
USE [Sales]; IF DATABASE_PRINCIPAL_ID(N'backupcycle') IS NULL CREATE USER [backupcycle] FOR LOGIN [backupcycle]; ALTER ROLE [db_backupoperator] ADD MEMBER [backupcycle];
GO

-- sequence: catalog reads the numbers of earlier sets from the backup history.
USE [msdb]; IF DATABASE_PRINCIPAL_ID(N'backupcycle') IS NULL CREATE USER [backupcycle] FOR LOGIN [backupcycle]; GRANT SELECT ON [dbo].[backupset] TO [backupcycle];
GO

PRINT 'source-login: backupcycle can back up Sales';
