package tsql

import "fmt"

// Queries about what an instance can host: its platform, configuration
// options, accelerators, volumes and directories.

// FileTypeFilestream is sys.master_files.type of a FILESTREAM container.
const FileTypeFilestream = 2

// Server configuration options the cycle reads (sys.configurations.name).
const (
	OptionFilestreamAccessLevel   = "filestream access level"
	OptionContainedAuthentication = "contained database authentication"
	OptionBackupCompressionAlg    = "backup compression algorithm"
	OptionHardwareOffload         = "hardware offload enabled"
)

// HostEdition returns the query for the server's major version, engine
// edition and edition: one row (major_version int, engine_edition int,
// edition nvarchar).
func HostEdition() string {
	return "SELECT CAST(SERVERPROPERTY(N'ProductMajorVersion') AS int) AS major_version, " +
		"CAST(SERVERPROPERTY(N'EngineEdition') AS int) AS engine_edition, " +
		"CAST(SERVERPROPERTY(N'Edition') AS nvarchar(128)) AS edition"
}

// HostPlatform returns the query for the operating system: one row
// (host_platform nvarchar: Windows or Linux). SQL Server 2017 and later;
// readable by public up to 2019, with VIEW SERVER PERFORMANCE STATE on 2022
// (https://learn.microsoft.com/en-us/sql/relational-databases/system-dynamic-management-views/sys-dm-os-host-info-transact-sql).
func HostPlatform() string { return "SELECT host_platform FROM sys.dm_os_host_info" }

// Configurations returns the query for the value in use of the options the
// cycle depends on: one row per option (name nvarchar, value int).
// sys.configurations is readable by public
// (https://learn.microsoft.com/en-us/sql/relational-databases/system-catalog-views/sys-configurations-transact-sql).
func Configurations() string {
	return "SELECT name, CAST(value_in_use AS int) AS value FROM sys.configurations WHERE name IN (" +
		QuoteString(OptionFilestreamAccessLevel) + ", " + QuoteString(OptionContainedAuthentication) + ", " +
		QuoteString(OptionBackupCompressionAlg) + ", " + QuoteString(OptionHardwareOffload) + ")"
}

// AcceleratorStatus returns the query for the integrated accelerators
// (SQL Server 2022): one row per accelerator (accelerator nvarchar, e.g.
// QAT; mode_desc nvarchar: NONE, HARDWARE or SOFTWARE)
// (https://learn.microsoft.com/en-us/sql/relational-databases/system-dynamic-management-views/sys-dm-server-accelerator-status-transact-sql).
func AcceleratorStatus() string {
	return "SELECT accelerator, mode_desc FROM sys.dm_server_accelerator_status"
}

// FileVolumes returns the query for every database file the login sees,
// with the volume it lies on: one row per file (database nvarchar,
// state_desc nvarchar, type int, physical_name nvarchar, pages bigint,
// volume_mount_point nvarchar, NULL on Linux; total_bytes bigint,
// available_bytes bigint). sys.dm_os_volume_stats needs VIEW SERVER STATE
// (2022: VIEW SERVER PERFORMANCE STATE)
// (https://learn.microsoft.com/en-us/sql/relational-databases/system-dynamic-management-views/sys-dm-os-volume-stats-transact-sql).
func FileVolumes() string {
	return "SELECT d.name AS database_name, d.state_desc, f.type, f.physical_name, CAST(f.size AS bigint) AS pages, " +
		"v.volume_mount_point, v.total_bytes, v.available_bytes " +
		"FROM sys.master_files AS f CROSS APPLY sys.dm_os_volume_stats(f.database_id, f.file_id) AS v " +
		"JOIN sys.databases AS d ON d.database_id = f.database_id"
}

// FileExists returns the query for whether path exists as SQL Server's
// service account sees it: one row (file_exists bit, file_is_a_directory
// bit, parent_directory_exists bit). sys.dm_os_file_exists exists from
// SQL Server 2017, on Windows and Linux; it is undocumented.
func FileExists(path string) (string, []any, error) {
	if path == "" {
		return "", nil, fmt.Errorf("file lookup: empty path")
	}
	return "SELECT file_exists, file_is_a_directory, parent_directory_exists FROM sys.dm_os_file_exists(@p1)", []any{path}, nil
}

// DatabaseContainment returns the query for a database's containment: one
// row (containment int: 0 NONE, 1 PARTIAL) when it exists
// (https://learn.microsoft.com/en-us/sql/relational-databases/system-catalog-views/sys-databases-transact-sql).
func DatabaseContainment(db string) (string, []any, error) {
	if err := CheckIdent(db); err != nil {
		return "", nil, fmt.Errorf("database containment lookup: %w", err)
	}
	return "SELECT CAST(containment AS int) AS containment FROM sys.databases WHERE name = @p1", []any{db}, nil
}
