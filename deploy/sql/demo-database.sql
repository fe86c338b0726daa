-- The compose stack's demo database: Sales on sql-primary, with a few tables of generated rows (about 40 MB), so
-- that the first cycle has something to back up, restore, check and count. Run by the one-shot compose service
-- demo-database with the SQL Server image's own sqlcmd (-b: the first error stops it with a non-zero exit).
-- Idempotent: an existing database, table or row is left as it is, so `docker compose up` may run it every time.
SET NOCOUNT ON;
IF DB_ID(N'Sales') IS NULL
BEGIN
    CREATE DATABASE [Sales];
    PRINT 'demo database: created Sales';
END
GO

USE [Sales];
GO

IF OBJECT_ID(N'dbo.Regions', N'U') IS NULL
    CREATE TABLE dbo.Regions (
        RegionID int NOT NULL CONSTRAINT PK_Regions PRIMARY KEY,
        Name nvarchar(50) NOT NULL
    );
IF OBJECT_ID(N'dbo.Customers', N'U') IS NULL
    CREATE TABLE dbo.Customers (
        CustomerID int NOT NULL CONSTRAINT PK_Customers PRIMARY KEY,
        Name nvarchar(100) NOT NULL,
        RegionID int NOT NULL CONSTRAINT FK_Customers_Regions REFERENCES dbo.Regions (RegionID)
    );
IF OBJECT_ID(N'dbo.Orders', N'U') IS NULL
    CREATE TABLE dbo.Orders (
        OrderID bigint NOT NULL CONSTRAINT PK_Orders PRIMARY KEY,
        CustomerID int NOT NULL CONSTRAINT FK_Orders_Customers REFERENCES dbo.Customers (CustomerID),
        OrderDate datetime2(0) NOT NULL,
        Amount decimal(12, 2) NOT NULL,
        Note nvarchar(200) NOT NULL
    );
GO

IF NOT EXISTS (SELECT 1 FROM dbo.Regions)
    INSERT INTO dbo.Regions (RegionID, Name)
    VALUES (1, N'North'), (2, N'South'), (3, N'East'), (4, N'West');

IF NOT EXISTS (SELECT 1 FROM dbo.Customers)
    INSERT INTO dbo.Customers (CustomerID, Name, RegionID)
    SELECT i, CONCAT(N'Customer ', i), 1 + i % 4
    FROM (SELECT TOP (5000) ROW_NUMBER() OVER (ORDER BY (SELECT NULL)) AS i
          FROM sys.all_columns AS a CROSS JOIN sys.all_columns AS b) AS n;

IF NOT EXISTS (SELECT 1 FROM dbo.Orders)
BEGIN
    INSERT INTO dbo.Orders (OrderID, CustomerID, OrderDate, Amount, Note)
    SELECT i,
           1 + i % 5000,
           DATEADD(MINUTE, -CAST(i AS int), SYSUTCDATETIME()),
           CAST(i % 100000 AS decimal(12, 2)) / 100,
           CONCAT(N'order ', i, N' of the backupcycle demo database')
    FROM (SELECT TOP (200000) ROW_NUMBER() OVER (ORDER BY (SELECT NULL)) AS i
          FROM sys.all_columns AS a CROSS JOIN sys.all_columns AS b) AS n;
    PRINT 'demo database: filled Sales (Regions, Customers, Orders)';
END
GO

SELECT N'Sales' AS [database],
       (SELECT COUNT_BIG(*) FROM dbo.Orders) AS orders,
       (SELECT SUM(size) * 8 / 1024 FROM sys.database_files) AS size_mb;
