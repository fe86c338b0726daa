-- The worker's login on sql-verify, the verification instance: exactly the grants `starter preflight` checks (README
-- "Permissions"), never sysadmin. It restores each copy, so it owns it: DBCC CHECKDB, REPLACE and DROP of the copy and
-- the sanity checks' user in it need nothing more, and the sanity queries themselves run as that user, not as this
-- login. Run by the one-shot compose service verify-login, as sa, with the SQL Server image's own sqlcmd (-b).
-- Idempotent.
:r /backupcycle/sql/login.sql

-- The restore proof: the copy was restored from this very backup set.
USE [msdb]; IF DATABASE_PRINCIPAL_ID(N'backupcycle') IS NULL CREATE USER [backupcycle] FOR LOGIN [backupcycle]; GRANT SELECT ON [dbo].[restorehistory] TO [backupcycle];
USE [msdb]; IF DATABASE_PRINCIPAL_ID(N'backupcycle') IS NULL CREATE USER [backupcycle] FOR LOGIN [backupcycle]; GRANT SELECT ON [dbo].[backupset] TO [backupcycle];
GO

PRINT 'verify-login: backupcycle can restore and check the copies';
