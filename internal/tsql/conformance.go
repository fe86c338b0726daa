package tsql

import (
	"fmt"
	"strings"
)

// Statements of `starter conformance`, which builds a scratch database of
// its own to see what SQL Server does where the product assumes: created
// by CREATE DATABASE (its creator owns it, so nothing but CREATE DATABASE
// is needed), filled with a table of one row per page, and given an indexed
// view so DBCC CHECKDB ... WITH EXTENDED_LOGICAL_CHECKS has one to check.

// Names of the scratch database's objects.
const (
	FillTable = "conformance_fill"     // dbo.conformance_fill (id int, pad nvarchar(4000))
	FillView  = "conformance_fill_ids" // dbo.conformance_fill_ids, WITH SCHEMABINDING, indexed
)

// FillRowBytes is what one row of FillTable holds: 4000 characters of
// nvarchar, 8000 bytes, so each row takes a page of its own (a row is at
// most 8060 bytes: "Maximum capacity specifications for SQL Server",
// https://learn.microsoft.com/en-us/sql/sql-server/maximum-capacity-specifications-for-sql-server).
const FillRowBytes = 8 << 10

// fillRowChars is the length of a row's pad.
const fillRowChars = 4000

// CreateDatabase builds CREATE DATABASE [db]: files of model's size in
// the instance's default directories, owned by the login that runs it
// (CREATE DATABASE (Transact-SQL),
// https://learn.microsoft.com/en-us/sql/t-sql/statements/create-database-transact-sql).
func CreateDatabase(db string) (string, error) {
	q, err := QuoteIdent(db)
	if err != nil {
		return "", fmt.Errorf("CREATE DATABASE: %w", err)
	}
	return "CREATE DATABASE " + q, nil
}

// FillSetup returns the statements that create FillTable in db with its
// first row (id 1), in order.
func FillSetup(db string) ([]string, error) {
	table, err := QualifiedName(db, "dbo", FillTable)
	if err != nil {
		return nil, fmt.Errorf("fill table: %w", err)
	}
	pk, err := QuoteIdent("pk_" + FillTable)
	if err != nil {
		return nil, err
	}
	return []string{
		"CREATE TABLE " + table + " (id int NOT NULL, pad nvarchar(4000) NOT NULL, CONSTRAINT " + pk + " PRIMARY KEY CLUSTERED (id))",
		"INSERT INTO " + table + " (id, pad) VALUES (1, N'" + strings.Repeat("x", fillRowChars) + "')",
	}, nil
}

// FillDouble builds the INSERT that doubles FillTable's rows: @p1 is the
// number of rows it holds (ids 1..@p1), the new rows get @p1+1..2*@p1.
func FillDouble(db string) (string, error) {
	table, err := QualifiedName(db, "dbo", FillTable)
	if err != nil {
		return "", fmt.Errorf("fill table: %w", err)
	}
	return "INSERT INTO " + table + " (id, pad) SELECT id + @p1, pad FROM " + table, nil
}

// IndexedView returns the statements that create FillView over FillTable
// and its unique clustered index, in order. CREATE VIEW must be the first
// statement of its batch and cannot name a database, so it runs through
// db's sp_executesql; the view is schema bound, as an indexed view must
// be, and the index is created with the SET options it requires
// (ARITHABORT ON, NUMERIC_ROUNDABORT OFF; go-mssqldb's sessions have the
// ANSI ones on): "Create indexed views",
// https://learn.microsoft.com/en-us/sql/relational-databases/views/create-indexed-views.
func IndexedView(db string) ([]string, error) {
	qdb, err := QuoteIdent(db)
	if err != nil {
		return nil, fmt.Errorf("indexed view: %w", err)
	}
	view, err := QualifiedName(db, "dbo", FillView)
	if err != nil {
		return nil, fmt.Errorf("indexed view: %w", err)
	}
	ix, err := QuoteIdent("ix_" + FillView)
	if err != nil {
		return nil, err
	}
	create := "CREATE VIEW dbo." + FillView + " WITH SCHEMABINDING AS SELECT id FROM dbo." + FillTable
	return []string{
		"EXEC " + qdb + ".sys.sp_executesql " + QuoteString(create),
		"SET ARITHABORT ON; SET NUMERIC_ROUNDABORT OFF; CREATE UNIQUE CLUSTERED INDEX " + ix + " ON " + view + " (id)",
	}, nil
}
