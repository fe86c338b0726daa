-- The worker's login backupcycle on a SQL Server instance, with the server permissions both roles need (README
-- "Permissions"): read by login-source.sql and login-verify.sql (sqlcmd :r). The password comes from the compose
-- secret the step is given, through the environment variable BACKUPCYCLE_PASSWORD, which sqlcmd reads as the scripting
-- variable $(BACKUPCYCLE_PASSWORD); it is never on a command line. A second run sets the password again.
SET NOCOUNT ON;
IF SUSER_ID(N'backupcycle') IS NULL
    CREATE LOGIN [backupcycle] WITH PASSWORD = N'$(BACKUPCYCLE_PASSWORD)';
ELSE
    ALTER LOGIN [backupcycle] WITH PASSWORD = N'$(BACKUPCYCLE_PASSWORD)';
-- Source: RESTORE HEADERONLY recognises a BACKUP that finished while no worker watched (it needs CREATE DATABASE).
-- Verification: RESTORE of the copies, which the login then owns, and RESTORE FILELISTONLY/HEADERONLY.
GRANT CREATE ANY DATABASE TO [backupcycle];
-- After a worker restart, find its own BACKUP, RESTORE or DBCC CHECKDB still running (SQL Server 2022).
GRANT VIEW SERVER PERFORMANCE STATE TO [backupcycle];
-- A cancelled cycle stops its running statement (KILL).
GRANT ALTER ANY CONNECTION TO [backupcycle];
GO
