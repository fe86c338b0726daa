// Package version says which build a binary is: the module version and the
// VCS revision the go command stamped into it (runtime/debug.ReadBuildInfo),
// for `--version` and the health check.
package version

import (
	"runtime/debug"
	"strings"
)

// String is "<module version> (<revision>[, modified] <commit time>, <go version>)",
// e.g. "v1.2.0 (3f2c1a9d0b7e, 2025-01-31T10:00:00Z, go1.26.8)". A build
// outside a module or a VCS checkout says "(devel)" and "unknown revision".
func String() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "(devel) (unknown revision)"
	}
	return format(bi)
}

func format(bi *debug.BuildInfo) string {
	v := bi.Main.Version
	if v == "" {
		v = "(devel)"
	}
	var rev, at string
	modified := false
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.time":
			at = s.Value
		case "vcs.modified":
			modified = s.Value == "true"
		}
	}
	var parts []string
	switch {
	case rev == "":
		parts = append(parts, "unknown revision")
	case len(rev) > 12:
		rev = rev[:12]
		fallthrough
	default:
		if modified {
			rev += ", modified"
		}
		parts = append(parts, rev)
	}
	if at != "" {
		parts = append(parts, at)
	}
	if bi.GoVersion != "" {
		parts = append(parts, bi.GoVersion)
	}
	return v + " (" + strings.Join(parts, ", ") + ")"
}
