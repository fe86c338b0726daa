// Package health holds the activity of the HealthCheck workflow: Health
// reports which worker process ran it.
package health

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"time"

	"go.uber.org/zap"

	"github.com/backupcycle/backupcycle/activities"
	"github.com/backupcycle/backupcycle/internal/config"
)

// Activities are the HealthCheck workflow's activity. The worker registers
// it beside the cycle's (workflows.Register); it reads the worker's
// version and configuration through Base.
type Activities struct {
	// Base carries the dependencies; a field, not embedded, so that
	// registering Activities registers only this package's methods.
	Base *activities.Activities
}

// New returns the health activity over base's dependencies.
func New(base *activities.Activities) *Activities { return &Activities{Base: base} }

// HealthInfo is what the Health activity reports about the worker that ran
// it. It deliberately holds nothing secret: it ends up in workflow history.
type HealthInfo struct {
	Host      string    `json:"host"`
	PID       int       `json:"pid"`
	Version   string    `json:"version"`
	GoVersion string    `json:"go_version"`
	Time      time.Time `json:"time"`
	// ManifestAuthentication is how this worker signs and checks manifests
	// (ManifestAuthentication); "" from a build before it said.
	ManifestAuthentication string `json:"manifest_authentication,omitempty"`
}

// AuthenticationOff is HealthInfo.ManifestAuthentication of a worker
// without manifest_keys: it neither signs nor authenticates manifests.
const AuthenticationOff = "off"

// ManifestAuthentication says how the configuration's manifests are signed
// and checked: "hmac-sha256, key <id> signs", AuthenticationOff without
// manifest_keys, or why its keys cannot be read (never a key).
func ManifestAuthentication(cfg *config.Config) string {
	keys, err := cfg.ManifestKeyRing()
	switch {
	case err != nil:
		return "unavailable: " + err.Error()
	case keys == nil:
		return AuthenticationOff
	}
	return "hmac-sha256, key " + keys.Current() + " signs"
}

// Health reports which worker process picked up the task, proving the round
// trip starter -> Temporal -> worker -> Temporal works.
func (a *Activities) Health(ctx context.Context) (HealthInfo, error) {
	host, err := os.Hostname()
	if err != nil {
		// Not fatal: the pid and version still identify the worker.
		host = "unknown"
	}
	info := HealthInfo{
		Host:                   host,
		PID:                    os.Getpid(),
		Version:                a.Base.Version,
		GoVersion:              runtime.Version(),
		Time:                   time.Now().UTC(),
		ManifestAuthentication: ManifestAuthentication(a.Base.Cycle.CurrentConfig()),
	}
	if info.Version == "" {
		info.Version = BuildVersion()
	}
	activities.Logger(a.Base, ctx).Info("health check", zap.String("host", info.Host), zap.Int("pid", info.PID),
		zap.String("version", info.Version), zap.String("manifest_authentication", info.ManifestAuthentication))
	return info, nil
}

// BuildVersion is the main module's version plus the VCS revision when the
// binary was built from a checkout ("(devel)+3f2c1a9e0b7d", "(devel)+3f2c..-dirty").
func BuildVersion() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	v := bi.Main.Version
	if v == "" {
		v = "(devel)"
	}
	var rev, dirty string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				dirty = "-dirty"
			}
		}
	}
	if rev != "" {
		if len(rev) > 12 {
			rev = rev[:12]
		}
		v = fmt.Sprintf("%s+%s%s", v, rev, dirty)
	}
	return v
}
