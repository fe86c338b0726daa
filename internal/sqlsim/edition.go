package sqlsim

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/backupcycle/backupcycle/internal/sqlsim/tds"
)

// Editions and versions: what SERVERPROPERTY, @@VERSION and PRELOGIN
// report, and what an edition refuses.

// versionInfo is one SQL Server build as the emulator reports it.
type versionInfo struct {
	year  int
	build string // ProductVersion
	level string // ProductLevel
	cu    string // ProductUpdateLevel
	kb    string
	minor uint8
	num   uint16 // build number for PRELOGIN / LOGINACK
	// dbVersion and compat are RESTORE HEADERONLY's DatabaseVersion (the
	// internal database version of the release) and CompatibilityLevel.
	dbVersion, compat int64
}

// builds are the builds Config.ProductVersion may name, per major version;
// the first is the default of Config.MajorVersion (a recent cumulative
// update). Numbers from "SQL Server 2016 build versions" (KB3177312),
// "SQL Server 2017 build versions" (KB4047329), "SQL Server 2019 build
// versions" (KB4518398) and "SQL Server 2022 build versions" (KB5018867);
// internal database versions 852, 869, 904 and 957 ("The importance of SQL
// Server's internal database version", MSSQLTips 7261). The older builds are
// the ones whose behaviour differs: 2016 SP1 CU3 predates the fixes of
// "Backup Compression for TDE-enabled Databases: Important fixes in SQL 2016
// SP1 CU4 and SQL 2016 RTM CU7"; 2019 CU15 predates, and CU16 brings, the
// backup format of KB5014298 for compressed backups of TDE databases.
var builds = map[int][]versionInfo{
	13: {
		{2016, "13.0.6300.2", "SP3", "", "KB5003279", 0, 6300, 852, 130},
		{2016, "13.0.4446.0", "SP1", "CU4", "KB4024305", 0, 4446, 852, 130},
		{2016, "13.0.4435.0", "SP1", "CU3", "KB4019916", 0, 4435, 852, 130},
	},
	14: {{2017, "14.0.3456.2", "RTM", "CU31", "KB5016884", 0, 3456, 869, 140}},
	15: {
		{2019, "15.0.4385.2", "RTM", "CU28", "KB5039747", 0, 4385, 904, 150},
		{2019, "15.0.4223.1", "RTM", "CU16", "KB5011644", 0, 4223, 904, 150},
		{2019, "15.0.4198.2", "RTM", "CU15", "KB5008996", 0, 4198, 904, 150},
	},
	16: {{2022, "16.0.4135.4", "RTM", "CU16", "KB5048033", 0, 4135, 957, 160}},
}

// editions maps Config.Edition to SERVERPROPERTY('Edition') and
// SERVERPROPERTY('EngineEdition'): 2 for Standard and Web, 3 for
// Enterprise and Developer, 4 for Express
// (https://learn.microsoft.com/en-us/sql/t-sql/functions/serverproperty-transact-sql).
var editions = map[string]struct {
	name   string
	engine int64
}{
	"enterprise": {"Enterprise Edition: Core-based Licensing (64-bit)", 3},
	"developer":  {"Developer Edition (64-bit)", 3},
	"standard":   {"Standard Edition (64-bit)", 2},
	"web":        {"Web Edition (64-bit)", 2},
	"express":    {"Express Edition (64-bit)", 4},
}

// checkServerConfig validates and defaults Edition, MajorVersion,
// ProductVersion, TimeZone
// and TLS.
func checkServerConfig(cfg *Config) error {
	if cfg.Edition == "" {
		cfg.Edition = "Developer"
	}
	if _, ok := editions[strings.ToLower(cfg.Edition)]; !ok {
		return fmt.Errorf("sqlsim: Config.Edition %q is unknown; use Enterprise, Developer, Standard, Web or Express", cfg.Edition)
	}
	if cfg.ProductVersion != "" && cfg.MajorVersion == 0 {
		if major, _, ok := strings.Cut(cfg.ProductVersion, "."); ok {
			cfg.MajorVersion, _ = strconv.Atoi(major)
		}
	}
	if cfg.MajorVersion == 0 {
		cfg.MajorVersion = 16
	}
	known, ok := builds[cfg.MajorVersion]
	if !ok {
		return fmt.Errorf("sqlsim: Config.MajorVersion %d is unknown; use 13 (2016), 14 (2017), 15 (2019) or 16 (2022)", cfg.MajorVersion)
	}
	if cfg.ProductVersion == "" {
		cfg.ProductVersion = known[0].build
	}
	if _, ok := buildOf(cfg.MajorVersion, cfg.ProductVersion); !ok {
		var names []string
		for _, v := range known {
			names = append(names, v.build)
		}
		return fmt.Errorf("sqlsim: Config.ProductVersion %q is not a build of major version %d the emulator knows; use one of %s",
			cfg.ProductVersion, cfg.MajorVersion, strings.Join(names, ", "))
	}
	if cfg.TimeZone == nil {
		cfg.TimeZone = time.UTC
	}
	switch strings.ToLower(cfg.TLS) {
	case "", "off":
		cfg.TLS = ""
	case "on", "strict":
		cfg.TLS = strings.ToLower(cfg.TLS)
	default:
		return fmt.Errorf("sqlsim: Config.TLS %q is unknown; use \"\" (off), \"on\" or \"strict\"", cfg.TLS)
	}
	return nil
}

// buildOf finds a known build of a major version.
func buildOf(major int, productVersion string) (versionInfo, bool) {
	for _, v := range builds[major] {
		if v.build == productVersion {
			return v, true
		}
	}
	return versionInfo{}, false
}

func (in *Instance) versionInfo() versionInfo {
	v, _ := buildOf(in.cfg.MajorVersion, in.cfg.ProductVersion)
	return v
}

// editionName is SERVERPROPERTY('Edition').
func (in *Instance) editionName() string { return editions[strings.ToLower(in.cfg.Edition)].name }

// engineEdition is SERVERPROPERTY('EngineEdition').
func (in *Instance) engineEdition() int64 { return editions[strings.ToLower(in.cfg.Edition)].engine }

// mediaVersion is the build that wrote a backup (major, minor, build);
// media from before it was recorded read as 16.0.4135.
func mediaVersion(h *mediaHeader) (major, minor, build int) {
	if _, err := fmt.Sscanf(h.SoftwareVersion, "%d.%d.%d", &major, &minor, &build); err != nil {
		return 16, 0, 4135
	}
	return major, minor, build
}

// softwareColumns are backupset's software_major_version,
// software_minor_version and software_build_version of a set written by
// build v; NULL for a set of a catalog that did not record it.
func softwareColumns(v string) (major, minor, build any) {
	var a, b, c int64
	if _, err := fmt.Sscanf(v, "%d.%d.%d", &a, &b, &c); err != nil {
		return nil, nil, nil
	}
	return a, b, c
}

// errNewerBackup is 3169, RESTORE DATABASE of a backup from a newer major
// version: backups "cannot be restored by any earlier version of SQL
// Server" ("Copy Databases with Backup and Restore",
// https://learn.microsoft.com/en-us/sql/relational-databases/databases/copy-databases-with-backup-and-restore).
// The versions print as SQL Server prints them, 16.00.4135 (error 3169 in
// "Database Engine events and errors (3000 to 3999)").
func errNewerBackup(h *mediaHeader, in *Instance) *tds.Error {
	major, minor, build := mediaVersion(h)
	v := in.versionInfo()
	return sqlErr(3169, 16, "The database was backed up on a server running version %d.%02d.%d. That version is incompatible with this server, which is running version %d.%02d.%d. Either restore the database on a server that supports the backup, or use a backup that is compatible with this server.",
		major, minor, build, in.cfg.MajorVersion, v.minor, v.num)
}

// mayRead refuses a backup this instance cannot read, before RESTORE
// (kind DATABASE, HEADERONLY, FILELISTONLY, VERIFYONLY) looks at its
// content:
//   - a backup from a newer major version: RESTORE DATABASE answers 3169;
//     HEADERONLY and FILELISTONLY cannot parse its media and answer 3241
//     "The media family on device '%ls' is incorrectly formed", the error
//     DBAs meet reading a newer version's backup (the same text KB5014298
//     quotes for another format it cannot read);
//   - a TDE database's backup without the certificate in master: 33111
//     (errNoCertificate).
func (x *execCtx) mayRead(op, kind string, st *stripe) error {
	h := st.hdr
	if major, _, _ := mediaVersion(h); major > x.in.cfg.MajorVersion {
		if kind == "DATABASE" {
			return opError(op, errNewerBackup(h, x.in))
		}
		return opError(op, errIncorrectlyFormed(st.path))
	}
	if h.TDEThumbprint != "" && !x.in.hasCertificate(h.TDEThumbprint) {
		return opError(op, errNoCertificate(h.TDEThumbprint))
	}
	// A set taken WITH ENCRYPTION keeps its header readable: HEADERONLY
	// gives KeyAlgorithm, EncryptorThumbprint and EncryptorType, "which
	// can be used to find certificate or the asymmetric key" (RESTORE
	// HEADERONLY). What else reads without the encryptor is not
	// documented; the emulator refuses FILELISTONLY, VERIFYONLY and
	// RESTORE with 33111, the stricter choice (as for TDE).
	if kind != "HEADERONLY" {
		if _, e := x.in.readCipher(h); e != nil {
			return opError(op, e)
		}
	}
	return nil
}
