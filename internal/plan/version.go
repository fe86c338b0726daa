package plan

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/backupcycle/backupcycle/internal/tsql"
)

// Version is a SQL Server build: SERVERPROPERTY('ProductVersion')
// ("16.0.4135.4") or what RESTORE HEADERONLY says wrote a backup
// (SoftwareVersionMajor.Minor.Build). The zero Version is unknown.
type Version struct {
	Major, Minor, Build, Revision int
	// revision: the text had one (13.0.4435.0 prints its 0).
	revision bool
}

// ParseVersion reads "16.0.4135.4" or "16.0.4135"; "" is the zero Version.
func ParseVersion(s string) (Version, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return Version{}, nil
	}
	parts := strings.Split(s, ".")
	if len(parts) < 3 || len(parts) > 4 {
		return Version{}, fmt.Errorf("SQL Server version %q: want major.minor.build[.revision], e.g. 16.0.4135.4", s)
	}
	var n [4]int
	for i, p := range parts {
		v, err := strconv.Atoi(p)
		if err != nil || v < 0 {
			return Version{}, fmt.Errorf("SQL Server version %q: %q is not a number", s, p)
		}
		n[i] = v
	}
	return Version{n[0], n[1], n[2], n[3], len(parts) == 4}, nil
}

// mustVersion parses a version literal of this package.
func mustVersion(s string) Version {
	v, err := ParseVersion(s)
	if err != nil {
		panic(err)
	}
	return v
}

// Known reports whether the version was read.
func (v Version) Known() bool { return v.Major > 0 }

// String is the version as ProductVersion prints it; the revision only
// when known.
func (v Version) String() string {
	if !v.Known() {
		return "unknown"
	}
	s := fmt.Sprintf("%d.%d.%d", v.Major, v.Minor, v.Build)
	if v.revision || v.Revision > 0 {
		s += fmt.Sprintf(".%d", v.Revision)
	}
	return s
}

// Release names the major version: "SQL Server 2022".
func (v Version) Release() string {
	names := map[int]string{11: "2012", 12: "2014", 13: "2016", 14: "2017", 15: "2019", 16: "2022", 17: "2025"}
	if name := names[v.Major]; name != "" {
		return "SQL Server " + name
	}
	return fmt.Sprintf("SQL Server major version %d", v.Major)
}

// Product names the build: "SQL Server 2022 (16.0.4135.4)".
func (v Version) Product() string { return fmt.Sprintf("%s (%s)", v.Release(), v) }

// Older reports v an older build than o, revisions aside.
func (v Version) Older(o Version) bool { return v.before(o.Major, o.Minor, o.Build) }

// before reports v older than the build major.minor.build, revisions aside.
func (v Version) before(major, minor, build int) bool {
	if v.Major != major {
		return v.Major < major
	}
	if v.Minor != minor {
		return v.Minor < minor
	}
	return v.Build < build
}

// Builds the restore and compression rules below name ("SQL Server 2016
// build versions", KB3177312; "SQL Server 2019 build versions", KB4518398).
var (
	build2016RTMCU7  = mustVersion("13.0.2210.0")
	build2016SP1     = mustVersion("13.0.4001.0")
	build2016SP1CU4  = mustVersion("13.0.4446.0")
	build2019CU5     = mustVersion("15.0.4043.16")
	build2019CU16    = mustVersion("15.0.4223.1")
	kb5014298        = "KB5014298 (FIX: Error 3241 occurs during executing RESTORE DATABASE or RESTORE LOG)"
	tdeCompressFixes = `"Backup Compression for TDE-enabled Databases: Important fixes in SQL 2016 SP1 CU4 and SQL 2016 RTM CU7"`
)

// Incompatible says why a backup written by src cannot be restored on
// instance verify of version dst, and what fixes it; "" when it can (or
// when a version is unknown). tdeCompressed: the backup is a compressed
// backup of a TDE database. The rules:
//   - SQL Server never restores a backup of a newer major version
//     ("Copy Databases with Backup and Restore": backups "cannot be
//     restored by any earlier version of SQL Server"): RESTORE HEADERONLY
//     and FILELISTONLY answer 3241, RESTORE DATABASE 3169;
//   - SQL Server 2019 CU16 and later write compressed backups of TDE
//     databases in a format only CU16 and later restore; CU15 and earlier
//     fail with 9004 or 3624 (KB5014298).
func Incompatible(src, dst Version, tdeCompressed bool, verify string) (why, fix string) {
	if !src.Known() || !dst.Known() {
		return "", ""
	}
	if dst.Major < src.Major {
		return fmt.Sprintf("a backup made by %s cannot be restored on %s: SQL Server never restores a backup of a newer version "+
				"(RESTORE HEADERONLY and FILELISTONLY answer 3241, RESTORE DATABASE 3169)", src.Product(), dst.Product()),
			fmt.Sprintf("upgrade %s to %s or later, or verify on an instance of that version or newer", verify, src.Release())
	}
	if tdeCompressed && src.Major == 15 && dst.Major == 15 && !src.before(15, 0, build2019CU16.Build) && dst.before(15, 0, build2019CU16.Build) {
		return fmt.Sprintf("a compressed backup of a TDE database made by %s (CU16 or later) cannot be restored on %s (before CU16): "+
				"CU16 changed its format (%s; the RESTORE fails with 9004 or 3624)", src.Product(), dst.Product(), kb5014298),
			fmt.Sprintf("patch %s to SQL Server 2019 CU16 (%s) or later", verify, build2019CU16)
	}
	return "", ""
}

// TDECompressionRisk says why compressed backups of a TDE database on src
// may not restore, with the fix; "" when the build has no known problem:
//   - SQL Server 2016 before RTM CU7 and SP1 before CU4: Microsoft advised
//     against this product's options (stripes, INIT, CHECKSUM) with TDE and
//     compression until those fixes (tdeCompressFixes);
//   - SQL Server 2019 before CU16: restoring compressed backups of TDE
//     databases "may cause" 3241, and only backups created with the fix
//     avoid it (KB5014298).
func TDECompressionRisk(src Version) (why, fix string) {
	switch {
	case !src.Known():
		return "", ""
	case src.Major == 13 && (src.before(13, 0, build2016RTMCU7.Build) || !src.before(13, 0, build2016SP1.Build) && src.before(13, 0, build2016SP1CU4.Build)):
		return fmt.Sprintf("%s predates the fixes of %s: compressed backups of TDE databases may fail or not restore", src.Product(), tdeCompressFixes),
			fmt.Sprintf("patch the source to SQL Server 2016 SP1 CU4 (%s), RTM CU7 (%s) or later, or set compression: false", build2016SP1CU4, build2016RTMCU7)
	case src.Major == 15 && src.before(15, 0, build2019CU16.Build):
		return fmt.Sprintf("%s writes compressed backups of TDE databases that may not restore (3241, %s)", src.Product(), kb5014298),
			fmt.Sprintf("patch the source to SQL Server 2019 CU16 (%s) or later, or set compression: false", build2019CU16)
	}
	return "", ""
}

// TDEMaxTransferSize is the MAXTRANSFERSIZE a compressed BACKUP of a TDE
// database must send on src when none is configured; 0 when the server
// needs none. SQL Server 2016 and 2017 compress a TDE database's pages only
// when "you must explicitly set MAXTRANSFERSIZE greater than 64K" ("BACKUP
// (Transact-SQL)"); 2019 CU5 and later raise it to 128 KiB on their own
// ("Backup compression (SQL Server)"). The value is SQL Server's default
// for other databases (DefaultMaxTransferSize), which the memory guard
// already counts for an unset max_transfer_size.
func TDEMaxTransferSize(src Version) int {
	if src.Known() && (src.Major == 13 || src.Major == 14 || src.Major == 15 && src.before(15, 0, build2019CU5.Build)) {
		return DefaultMaxTransferSize
	}
	return 0
}

// CertificateExpiryWarning is how long before its expiry a backup
// encryption certificate is warned of: from its expiry on, SQL Server
// refuses BACKUP WITH ENCRYPTION with it (3096), and a month of nights
// leaves time to roll its successor out to every restoring instance.
const CertificateExpiryWarning = 30 * 24 * time.Hour

// TDECertificateFix says how a verification instance gets the certificate
// of a TDE database: back it up with its private key on the source, create
// it from those files in master on the verification instance ("Move a TDE
// Protected Database to Another SQL Server"). name is the certificate's
// name on the source ("" when unknown: a placeholder).
func TDECertificateFix(source, verify, name string) string {
	if name == "" {
		name = "<certificate>"
	}
	backup, err := tsql.BackupCertificate(name, "<password>")
	if err != nil {
		return fmt.Sprintf("install the certificate on %s", verify)
	}
	create, _ := tsql.CreateCertificateFromFile(name, "<password>")
	cert, key := tsql.CertificateFiles(name)
	return fmt.Sprintf("on %s back the certificate up with its private key: %s then copy %s and %s to %s and create it in master there "+
		"(after CREATE MASTER KEY ENCRYPTION BY PASSWORD = N'<password>' if master has no database master key): %s",
		source, backup, cert, key, verify, create)
}

// ProviderKeyFix says how an instance that restores backups encrypted by
// an asymmetric key of an EKM provider gets it: register the same provider
// there and open the same provider key in master (CREATE ASYMMETRIC KEY
// ... CREATION_DISPOSITION = OPEN_EXISTING); the key cannot be exported.
func ProviderKeyFix(verify, name string) string {
	open, err := tsql.OpenProviderKey(name)
	if err != nil {
		return fmt.Sprintf("open the same EKM provider key on %s", verify)
	}
	return fmt.Sprintf("on %s register the source's EKM provider (CREATE CRYPTOGRAPHIC PROVIDER) and open the same provider key in master: %s",
		verify, open)
}
