package tsql

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

func ptr[T any](v T) *T { return &v }

func TestBackupDatabaseGolden(t *testing.T) {
	tests := []struct {
		name string
		opts BackupOptions
		want string
	}{
		{
			name: "seed minimal",
			opts: BackupOptions{Database: "MyVLDB", Disks: []string{`\\BAK01\backup\MyVLDB.bak`}, Checksum: true, Init: true},
			want: `BACKUP DATABASE [MyVLDB] TO DISK = N'\\BAK01\backup\MyVLDB.bak' WITH CHECKSUM, INIT`,
		},
		{
			name: "every option",
			opts: BackupOptions{
				Database: "Sales", Disks: []string{`\\192.168.2.2\backup\Sales_00000001_1of2.bak`, `\\192.168.3.2\backup\Sales_00000001_2of2.bak`},
				Checksum: true, Init: true, Format: true, Compression: ptr(true), CopyOnly: true, Stats: 5,
				BufferCount: 256, MaxTransferSize: 4194304, BlockSize: 65536, Name: "Sales 1", Description: "backupcycle O'Brien",
			},
			want: `BACKUP DATABASE [Sales] TO DISK = N'\\192.168.2.2\backup\Sales_00000001_1of2.bak', DISK = N'\\192.168.3.2\backup\Sales_00000001_2of2.bak' ` +
				`WITH CHECKSUM, INIT, FORMAT, COMPRESSION, COPY_ONLY, BUFFERCOUNT = 256, MAXTRANSFERSIZE = 4194304, BLOCKSIZE = 65536, ` +
				`NAME = N'Sales 1', DESCRIPTION = N'backupcycle O''Brien', STATS = 5`,
		},
		{
			name: "hostile name, compression off",
			opts: BackupOptions{Database: "Sales]; DROP DATABASE x--", Disks: []string{`/srv/bak/it's.bak`}, Compression: ptr(false)},
			want: `BACKUP DATABASE [Sales]]; DROP DATABASE x--] TO DISK = N'/srv/bak/it''s.bak' WITH NO_COMPRESSION`,
		},
		{
			name: "no options",
			opts: BackupOptions{Database: "d", Disks: []string{"x.bak"}},
			want: `BACKUP DATABASE [d] TO DISK = N'x.bak'`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := BackupDatabase(tt.opts)
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("got\n%s\nwant\n%s", got, tt.want)
			}
		})
	}
}

func TestBackupDatabaseRejects(t *testing.T) {
	base := func() BackupOptions { return BackupOptions{Database: "Sales", Disks: []string{"a.bak"}} }
	many := make([]string, 65)
	for i := range many {
		many[i] = StripeFileName("sql01", "Sales", 1, i+1, 65)
	}
	tests := []struct {
		name    string
		mod     func(*BackupOptions)
		wantMsg string
	}{
		{"no disks", func(o *BackupOptions) { o.Disks = nil }, "at least one DISK"},
		{"65 disks", func(o *BackupOptions) { o.Disks = many }, "at most 64"},
		{"duplicate disk", func(o *BackupOptions) { o.Disks = []string{"a.bak", "a.bak"} }, "listed twice"},
		{"NUL in path", func(o *BackupOptions) { o.Disks = []string{"a\x00.bak"} }, "NUL"},
		{"MAXTRANSFERSIZE not multiple", func(o *BackupOptions) { o.MaxTransferSize = 100000 }, "MAXTRANSFERSIZE 100000"},
		{"MAXTRANSFERSIZE too big", func(o *BackupOptions) { o.MaxTransferSize = 8 << 20 }, "4 MiB"},
		{"BLOCKSIZE not power of two", func(o *BackupOptions) { o.BlockSize = 3000 }, "BLOCKSIZE 3000"},
		{"BLOCKSIZE too small", func(o *BackupOptions) { o.BlockSize = 256 }, "BLOCKSIZE 256"},
		{"BUFFERCOUNT negative", func(o *BackupOptions) { o.BufferCount = -1 }, "BUFFERCOUNT -1"},
		{"STATS 101", func(o *BackupOptions) { o.Stats = 101 }, "STATS = 101"},
		{"description too long", func(o *BackupOptions) { o.Description = strings.Repeat("d", 256) }, "DESCRIPTION is 256"},
		{"empty db", func(o *BackupOptions) { o.Database = "" }, "empty"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := base()
			tt.mod(&o)
			_, err := BackupDatabase(o)
			if err == nil {
				t.Fatal("accepted")
			}
			if !strings.Contains(err.Error(), tt.wantMsg) {
				t.Errorf("error %q does not mention %q", err, tt.wantMsg)
			}
		})
	}
}

func TestRestoreStatementsGolden(t *testing.T) {
	disks := []string{`\\BAK02\backup\Sales_00000003_1of2.bak`, `\\BAK02\backup\Sales_00000003_2of2.bak`}
	from := `FROM DISK = N'\\BAK02\backup\Sales_00000003_1of2.bak', DISK = N'\\BAK02\backup\Sales_00000003_2of2.bak'`
	check := func(got string, err error, want string) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Errorf("got\n%s\nwant\n%s", got, want)
		}
	}
	got, err := RestoreFileListOnly(disks)
	check(got, err, "RESTORE FILELISTONLY "+from)
	got, err = RestoreHeaderOnly(disks)
	check(got, err, "RESTORE HEADERONLY "+from)
	got, err = RestoreVerifyOnly(disks, true)
	check(got, err, "RESTORE VERIFYONLY "+from+" WITH CHECKSUM")
	got, err = RestoreVerifyOnly(disks[:1], false)
	check(got, err, `RESTORE VERIFYONLY FROM DISK = N'\\BAK02\backup\Sales_00000003_1of2.bak'`)

	got, err = RestoreDatabase(RestoreOptions{
		Database: "Sales]_verify", Disks: disks, Checksum: true, Replace: true, Stats: 10,
		Moves: []Move{
			{LogicalName: "Sales", PhysicalName: `D:\restore\data\Sales]_verify_1_Sales.mdf`},
			{LogicalName: "Sales_log'q", PhysicalName: `D:\restore\log\Sales]_verify_2_Sales_log.ldf`},
		},
	})
	check(got, err, "RESTORE DATABASE [Sales]]_verify] "+from+` WITH MOVE N'Sales' TO N'D:\restore\data\Sales]_verify_1_Sales.mdf', `+
		`MOVE N'Sales_log''q' TO N'D:\restore\log\Sales]_verify_2_Sales_log.ldf', CHECKSUM, REPLACE, RECOVERY, STATS = 10`)

	got, err = RestoreDatabase(RestoreOptions{Database: "x", Disks: disks[:1], NoRecovery: true})
	check(got, err, `RESTORE DATABASE [x] FROM DISK = N'\\BAK02\backup\Sales_00000003_1of2.bak' WITH NORECOVERY`)
	got, err = RestoreDatabase(RestoreOptions{Database: "x", Disks: disks[:1], Checksum: true, Replace: true, NewBroker: true})
	check(got, err, `RESTORE DATABASE [x] FROM DISK = N'\\BAK02\backup\Sales_00000003_1of2.bak' WITH CHECKSUM, REPLACE, RECOVERY, NEW_BROKER`)

	if _, err := RestoreFileListOnly(nil); err == nil {
		t.Error("FILELISTONLY without disks accepted")
	}
	for _, moves := range [][]Move{
		{{"a", `C:\x.mdf`}, {"a", `C:\y.mdf`}},
		{{"a", `C:\x.mdf`}, {"b", `c:\X.MDF`}},
		{{"a", ""}},
		{{"", `C:\x.mdf`}},
	} {
		if _, err := RestoreDatabase(RestoreOptions{Database: "x", Disks: disks, Moves: moves}); err == nil {
			t.Errorf("RestoreDatabase accepted moves %v", moves)
		}
	}
}

func TestCheckDBAndDrop(t *testing.T) {
	got, err := CheckDB("Sales]; DROP DATABASE x--_verify")
	if err != nil {
		t.Fatal(err)
	}
	if want := "DBCC CHECKDB([Sales]]; DROP DATABASE x--_verify]) WITH NO_INFOMSGS, ALL_ERRORMSGS, EXTENDED_LOGICAL_CHECKS, DATA_PURITY"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	// The verification step's CHECKDB names its set, so that its text is
	// its own and no other CHECKDB of the copy.
	got, err = VerifyCheckDB("Sales */ x_verify", 42)
	if want := "DBCC CHECKDB([Sales */ x_verify]) WITH NO_INFOMSGS, ALL_ERRORMSGS, EXTENDED_LOGICAL_CHECKS, DATA_PURITY /* backupcycle seq 00000042 */"; err != nil || got != want {
		t.Errorf("VerifyCheckDB = %q, %v; want %q", got, err, want)
	}
	if m, err := CheckDBMarker("Sales */ x_verify", 42); err != nil || m != got {
		t.Errorf("CheckDBMarker = %q, %v; want the whole statement %q", m, err, got)
	}
	got, err = CheckDB("d", PhysicalOnly, NoInfoMsgs, PhysicalOnly)
	if err != nil || got != "DBCC CHECKDB([d]) WITH PHYSICAL_ONLY, NO_INFOMSGS" {
		t.Errorf("got %q, %v", got, err)
	}
	if _, err := CheckDB("d", PhysicalOnly, DataPurity); !errors.Is(err, ErrInvalidOption) {
		t.Errorf("PHYSICAL_ONLY + DATA_PURITY: got %v", err)
	}
	if _, err := CheckDB("d", "REPAIR_ALLOW_DATA_LOSS"); err == nil {
		t.Error("unknown option accepted")
	}

	got, err = DropDatabase("O'Brien]")
	if err != nil {
		t.Fatal(err)
	}
	want := "IF DB_ID(N'O''Brien]') IS NOT NULL\nBEGIN\n    IF DATABASEPROPERTYEX(N'O''Brien]', 'Status') = N'ONLINE'\n" +
		"        ALTER DATABASE [O'Brien]]] SET SINGLE_USER WITH ROLLBACK IMMEDIATE;\n    DROP DATABASE [O'Brien]]];\nEND"
	if got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}

func TestParameterisedQueries(t *testing.T) {
	hostile := "Sales]; DROP DATABASE x--"
	sql, args, err := DatabaseExists(hostile)
	if err != nil || sql != "SELECT database_id FROM sys.databases WHERE name = @p1" || !reflect.DeepEqual(args, []any{hostile}) {
		t.Errorf("DatabaseExists = %q, %v, %v", sql, args, err)
	}
	sql, args, err = InFlightRequests(hostile)
	if err != nil {
		t.Fatal(err)
	}
	wantSQL := "SELECT session_id, command, percent_complete, database_id, estimated_completion_time, start_time " +
		"FROM sys.dm_exec_requests WHERE database_id = DB_ID(@p1) AND (command LIKE @p2 OR command LIKE @p3 OR command LIKE @p4) ORDER BY start_time"
	if sql != wantSQL || !reflect.DeepEqual(args, []any{hostile, "BACKUP DATABASE", "RESTORE DATABASE", "DBCC %"}) {
		t.Errorf("InFlightRequests = %q, %v", sql, args)
	}
	sql, args, err = InFlightRequests("d", CommandBackupDatabase)
	if err != nil || !strings.HasSuffix(sql, "(command LIKE @p2) ORDER BY start_time") || len(args) != 2 {
		t.Errorf("InFlightRequests(one command) = %q, %v, %v", sql, args, err)
	}
	sql, args, err = InFlightRequests("", CommandRestoreDatabase)
	if err != nil || sql != "SELECT session_id, command, percent_complete, database_id, estimated_completion_time, start_time "+
		"FROM sys.dm_exec_requests WHERE (command LIKE @p1) ORDER BY start_time" || !reflect.DeepEqual(args, []any{"RESTORE DATABASE"}) {
		t.Errorf("InFlightRequests(all databases) = %q, %v, %v", sql, args, err)
	}
	sql, args, err = LastRestore(hostile)
	if err != nil || !strings.Contains(sql, "FROM msdb.dbo.restorehistory WHERE destination_database_name = @p1 AND restore_type = 'D' ORDER BY restore_history_id DESC") ||
		!reflect.DeepEqual(args, []any{hostile}) {
		t.Errorf("LastRestore = %q, %v, %v", sql, args, err)
	}
	for _, f := range []func(string) (string, []any, error){DatabaseExists, LastRestore, func(s string) (string, []any, error) { return InFlightRequests(s) }} {
		if _, _, err := f("a\x00"); err == nil {
			t.Error("NUL name accepted")
		}
	}
}

func TestSequenceStatements(t *testing.T) {
	setup, err := SequenceSetup("My]DB")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"IF NOT EXISTS (SELECT 1 FROM [My]]DB].sys.schemas WHERE name = N'DBBackup') EXEC [My]]DB].sys.sp_executesql N'CREATE SCHEMA [DBBackup]'",
		"IF OBJECT_ID(N'[My]]DB].[DBBackup].[Sequence]', N'U') IS NULL CREATE TABLE [My]]DB].[DBBackup].[Sequence] (Number int NOT NULL, ID int NOT NULL, " +
			"CONSTRAINT PK_Seq PRIMARY KEY CLUSTERED (ID ASC), CONSTRAINT CK_Seq CHECK (ID = 1))",
		"IF NOT EXISTS (SELECT 1 FROM [My]]DB].[DBBackup].[Sequence] WHERE ID = 1) INSERT INTO [My]]DB].[DBBackup].[Sequence] (Number, ID) VALUES (0, 1)",
	}
	if !reflect.DeepEqual(setup, want) {
		t.Errorf("SequenceSetup =\n%s\nwant\n%s", strings.Join(setup, "\n"), strings.Join(want, "\n"))
	}
	next, err := SequenceNext("Sales")
	if err != nil || next != "UPDATE [Sales].[DBBackup].[Sequence] SET Number = Number + 1 OUTPUT inserted.Number WHERE ID = 1" {
		t.Errorf("SequenceNext = %q, %v", next, err)
	}
	// A database name with a quote must not break the N'...' literal of OBJECT_ID.
	setup, err = SequenceSetup("O'Brien")
	if err != nil || !strings.Contains(setup[1], "OBJECT_ID(N'[O''Brien].[DBBackup].[Sequence]', N'U')") {
		t.Errorf("SequenceSetup(O'Brien)[1] = %q, %v", setup[1], err)
	}
}

func TestSanityStatements(t *testing.T) {
	tests := []struct {
		s    Sanity
		want string
	}{
		{Sanity{Kind: SanityRowCount, Table: "Orders"}, "SELECT COUNT_BIG(*) FROM [Sales_verify].[dbo].[Orders]"},
		{Sanity{Kind: SanityRowCount, Schema: "s]x", Table: "T'1"}, "SELECT COUNT_BIG(*) FROM [Sales_verify].[s]]x].[T'1]"},
		{Sanity{Kind: SanityMax, Schema: "dbo", Table: "Orders", Column: "OrderDate"}, "SELECT MAX([OrderDate]) FROM [Sales_verify].[dbo].[Orders]"},
		{Sanity{Kind: SanityQuery, Query: "  SELECT CASE WHEN EXISTS (SELECT 1 FROM dbo.Orders) THEN 1 ELSE 0 END \n"},
			"SELECT CASE WHEN EXISTS (SELECT 1 FROM dbo.Orders) THEN 1 ELSE 0 END"},
	}
	for _, tt := range tests {
		got, err := SanityStatement("Sales_verify", tt.s)
		if err != nil || got != tt.want {
			t.Errorf("SanityStatement(%+v) = %q, %v; want %q", tt.s, got, err, tt.want)
		}
	}
	for _, bad := range []Sanity{
		{Kind: SanityRowCount},
		{Kind: SanityMax, Table: "T"},
		{Kind: SanityQuery},
		{Kind: "delete", Table: "T"},
		{Kind: SanityRowCount, Table: "T; DROP TABLE x", Schema: strings.Repeat("s", 200)},
	} {
		if got, err := SanityStatement("db", bad); err == nil {
			t.Errorf("SanityStatement(%+v) accepted: %q", bad, got)
		}
	}
}

func TestLayoutBalance(t *testing.T) {
	nics := []string{`\\192.168.2.2\backup`, `\\192.168.3.2\backup\`, `\\192.168.4.2\backup`, `\\192.168.5.2\backup`}
	stripes, err := Layout(nics, NamesOf("sql01", "Sales"), 12, 8)
	if err != nil {
		t.Fatal(err)
	}
	perNIC := map[string]int{}
	for i, s := range stripes {
		if s.Index != i+1 || s.Count != 8 || s.Name != StripeFileName("sql01", "Sales", 12, i+1, 8) {
			t.Errorf("stripe %d = %+v", i, s)
		}
		if s.Dir != nics[i%4] {
			t.Errorf("stripe %d on %q, want round-robin %q", i+1, s.Dir, nics[i%4])
		}
		if i > 0 && s.Dir == stripes[i-1].Dir {
			t.Errorf("stripes %d and %d share a NIC", i, i+1)
		}
		perNIC[s.Dir]++
	}
	for _, n := range nics {
		if perNIC[n] != 2 {
			t.Errorf("NIC %q carries %d stripes, want 2", n, perNIC[n])
		}
	}
	if want := `\\192.168.3.2\backup\sql01@Sales~8de4e0ea_00000012_2of8.bak`; stripes[1].Path != want {
		t.Errorf("path %q, want %q (no doubled separator)", stripes[1].Path, want)
	}
	if got := Paths(stripes)[7]; got != `\\192.168.5.2\backup\sql01@Sales~8de4e0ea_00000012_8of8.bak` {
		t.Errorf("Paths[7] = %q", got)
	}

	// 3 NICs, 7 stripes: counts differ by at most one.
	stripes, err = Layout(nics[:3], NamesOf("sql01", "d"), 1, 7)
	if err != nil {
		t.Fatal(err)
	}
	counts := map[string]int{}
	for _, s := range stripes {
		counts[s.Dir]++
	}
	if counts[nics[0]] != 3 || counts[nics[1]] != 2 || counts[nics[2]] != 2 {
		t.Errorf("7 over 3 NICs: %v", counts)
	}

	for _, tc := range []struct {
		paths []string
		n     int
	}{{nil, 2}, {nics, 0}, {nics, 65}, {[]string{"a", "a"}, 2}, {[]string{" "}, 1}} {
		if _, err := Layout(tc.paths, NamesOf("sql01", "d"), 1, tc.n); err == nil {
			t.Errorf("Layout(%q, %d) accepted", tc.paths, tc.n)
		}
	}
}

func TestJoinPath(t *testing.T) {
	tests := []struct{ dir, name, want string }{
		{`\\10.0.0.2\backup`, "f.bak", `\\10.0.0.2\backup\f.bak`},
		{`\\10.0.0.2\backup\`, "f.bak", `\\10.0.0.2\backup\f.bak`},
		{`C:\restore`, "f.mdf", `C:\restore\f.mdf`},
		{"/var/opt/mssql/backup", "f.bak", "/var/opt/mssql/backup/f.bak"},
		{"/var/opt/mssql/backup/", "f.bak", "/var/opt/mssql/backup/f.bak"},
		{"/", "f.bak", "/f.bak"},
	}
	for _, tt := range tests {
		if got := JoinPath(tt.dir, tt.name); got != tt.want {
			t.Errorf("JoinPath(%q, %q) = %q, want %q", tt.dir, tt.name, got, tt.want)
		}
	}
}

func TestMovesCollisionFree(t *testing.T) {
	rows := []FileListRow{
		{LogicalName: "Sales_log", PhysicalName: `L:\log\Sales_log.ldf`, Type: "L", FileID: 2},
		{LogicalName: "Sales", PhysicalName: `D:\data\Sales.mdf`, Type: "D", FileID: 1},
		// Same base name as file 4, different source directory.
		{LogicalName: "Sales_2", PhysicalName: `E:\data\Sales_2.ndf`, Type: "D", FileID: 3},
		{LogicalName: "Sales_2b", PhysicalName: `F:\data\Sales_2.ndf`, Type: "D", FileID: 4},
		{LogicalName: "O'Brien data", PhysicalName: "/var/opt/mssql/data/o'brien.ndf", Type: "D", FileID: 5},
		{LogicalName: "fs", PhysicalName: `D:\data\fs_container`, Type: "S", FileID: 65537},
	}
	moves, err := Moves("Sales_verify", rows, `R:\restore\data`, `R:\restore\log\`)
	if err != nil {
		t.Fatal(err)
	}
	want := []Move{
		{"Sales", `R:\restore\data\Sales_verify_1_Sales.mdf`},
		{"Sales_log", `R:\restore\log\Sales_verify_2_Sales_log.ldf`},
		{"Sales_2", `R:\restore\data\Sales_verify_3_Sales_2.ndf`},
		{"Sales_2b", `R:\restore\data\Sales_verify_4_Sales_2.ndf`},
		{"O'Brien data", `R:\restore\data\Sales_verify_5_o'brien.ndf`},
		{"fs", `R:\restore\data\Sales_verify_65537_fs_container`},
	}
	if !reflect.DeepEqual(moves, want) {
		t.Errorf("Moves =\n%v\nwant\n%v", moves, want)
	}
	seen := map[string]bool{}
	for _, m := range moves {
		k := strings.ToLower(m.PhysicalName)
		if seen[k] {
			t.Errorf("collision on %q", m.PhysicalName)
		}
		seen[k] = true
	}
	// The moves feed RESTORE DATABASE as they are.
	stmt, err := RestoreDatabase(RestoreOptions{Database: "Sales_verify", Disks: []string{"a.bak"}, Moves: moves, Checksum: true, Replace: true})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(stmt, `MOVE N'O''Brien data' TO N'R:\restore\data\Sales_verify_5_o''brien.ndf'`) {
		t.Errorf("restore statement does not quote the moved file: %s", stmt)
	}

	// A hostile verification name keeps file names legal on Windows.
	moves, err = Moves(`x/y:z`, rows[1:2], "/restore", "/restore")
	if err != nil || moves[0].PhysicalName != "/restore/x%2Fy%3Az_1_Sales.mdf" {
		t.Errorf("hostile verify name: %v, %v", moves, err)
	}

	for _, tc := range []struct {
		name string
		rows []FileListRow
		data string
	}{
		{"no rows", nil, "D:"},
		{"duplicate file id", []FileListRow{rows[1], rows[1]}, "D:"},
		{"unknown type", []FileListRow{{LogicalName: "x", PhysicalName: "x.mdf", Type: "Q", FileID: 1}}, "D:"},
		{"no data dir", rows, ""},
		{"path too long", rows[1:2], `D:\` + strings.Repeat("d", 250)},
	} {
		if _, err := Moves("v", tc.rows, tc.data, `L:\`); err == nil {
			t.Errorf("%s: accepted", tc.name)
		}
	}
}

func TestSanityUserStatements(t *testing.T) {
	setup := SanityUserSetup()
	want := []string{
		"IF DATABASE_PRINCIPAL_ID(N'backupcycle_sanity') IS NOT NULL DROP USER [backupcycle_sanity]",
		"CREATE USER [backupcycle_sanity] WITHOUT LOGIN WITH DEFAULT_SCHEMA = [dbo]",
		"ALTER ROLE [db_datareader] ADD MEMBER [backupcycle_sanity]",
	}
	if strings.Join(setup, "\n") != strings.Join(want, "\n") {
		t.Errorf("SanityUserSetup = %q", setup)
	}
	for in, want := range map[string]string{
		"fn_IntegrityOK":          "GRANT EXECUTE ON OBJECT::[dbo].[fn_IntegrityOK] TO [backupcycle_sanity]",
		"app.fn_Check":            "GRANT EXECUTE ON OBJECT::[app].[fn_Check] TO [backupcycle_sanity]",
		"[my app].[fn.x]":         "GRANT EXECUTE ON OBJECT::[my app].[fn.x] TO [backupcycle_sanity]",
		"[a]]b].[c; DROP USER x]": "GRANT EXECUTE ON OBJECT::[a]]b].[c; DROP USER x] TO [backupcycle_sanity]",
	} {
		if got, err := SanityGrant(in); err != nil || got != want {
			t.Errorf("SanityGrant(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "db.dbo.fn", "[open", "dbo."} {
		if got, err := SanityGrant(bad); err == nil {
			t.Errorf("SanityGrant(%q) = %q, want an error", bad, got)
		}
	}
	if q, args, err := CopyOptions("Sales_verify"); err != nil || q != "SELECT is_trustworthy_on, is_read_only FROM sys.databases WHERE name = @p1" ||
		len(args) != 1 || args[0] != "Sales_verify" {
		t.Errorf("CopyOptions = %q %v %v", q, args, err)
	}
	if q, err := SetReadOnly("Sa]les_verify", false); err != nil || q != "ALTER DATABASE [Sa]]les_verify] SET READ_WRITE WITH ROLLBACK IMMEDIATE" {
		t.Errorf("SetReadOnly = %q, %v", q, err)
	}
}

func TestPageVerifyAndAgentJobs(t *testing.T) {
	if fix, err := PageVerifyChecksum("Sa]les"); err != nil || fix != "ALTER DATABASE [Sa]]les] SET PAGE_VERIFY CHECKSUM" {
		t.Errorf("PageVerifyChecksum = %q, %v", fix, err)
	}
	patterns := []string{"%_verify"}
	for cmd, want := range map[string]bool{
		"EXECUTE dbo.IndexOptimize @Databases = 'USER_DATABASES'":              true,
		"EXECUTE dbo.DatabaseBackup @Databases = 'all_databases', @BackupType": true,
		"EXECUTE dbo.DatabaseBackup @Databases = 'USER_DATABASES, -%_VERIFY'":  false,
		"EXECUTE dbo.DatabaseBackup @Databases = 'Sales, HR'":                  false,
	} {
		if got, _ := SelectsAllDatabases(cmd, patterns); got != want {
			t.Errorf("SelectsAllDatabases(%q) = %v, want %v", cmd, got, want)
		}
	}
}
