package sqlsim

import (
	"fmt"
	"strings"
	"time"
)

// Editions and versions: what SERVERPROPERTY, @@VERSION and PRELOGIN
// report, and what an edition refuses.

// versionInfo is one SQL Server release as the emulator reports it (a
// recent cumulative update of each).
type versionInfo struct {
	year  int
	build string // ProductVersion
	level string // ProductLevel
	cu    string // ProductUpdateLevel
	kb    string
	minor uint8
	num   uint16 // build number for PRELOGIN / LOGINACK
}

var versions = map[int]versionInfo{
	13: {2016, "13.0.6300.2", "SP3", "", "KB5003279", 0, 6300},
	14: {2017, "14.0.3456.2", "RTM", "CU31", "KB5016884", 0, 3456},
	15: {2019, "15.0.4385.2", "RTM", "CU28", "KB5039747", 0, 4385},
	16: {2022, "16.0.4135.4", "RTM", "CU16", "KB5048033", 0, 4135},
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

// checkServerConfig validates and defaults Edition, MajorVersion, TimeZone
// and TLS.
func checkServerConfig(cfg *Config) error {
	if cfg.Edition == "" {
		cfg.Edition = "Developer"
	}
	if _, ok := editions[strings.ToLower(cfg.Edition)]; !ok {
		return fmt.Errorf("sqlsim: Config.Edition %q is unknown; use Enterprise, Developer, Standard, Web or Express", cfg.Edition)
	}
	if cfg.MajorVersion == 0 {
		cfg.MajorVersion = 16
	}
	if _, ok := versions[cfg.MajorVersion]; !ok {
		return fmt.Errorf("sqlsim: Config.MajorVersion %d is unknown; use 13 (2016), 14 (2017), 15 (2019) or 16 (2022)", cfg.MajorVersion)
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

func (in *Instance) versionInfo() versionInfo { return versions[in.cfg.MajorVersion] }

// editionName is SERVERPROPERTY('Edition').
func (in *Instance) editionName() string { return editions[strings.ToLower(in.cfg.Edition)].name }

// engineEdition is SERVERPROPERTY('EngineEdition').
func (in *Instance) engineEdition() int64 { return editions[strings.ToLower(in.cfg.Edition)].engine }
