package activities

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"time"

	"go.uber.org/zap"
)

// HealthInfo is what the Health activity reports about the worker that ran
// it. It deliberately holds nothing secret: it ends up in workflow history.
type HealthInfo struct {
	Host      string    `json:"host"`
	PID       int       `json:"pid"`
	Version   string    `json:"version"`
	GoVersion string    `json:"go_version"`
	Time      time.Time `json:"time"`
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
		Host:      host,
		PID:       os.Getpid(),
		Version:   a.Version,
		GoVersion: runtime.Version(),
		Time:      time.Now().UTC(),
	}
	if info.Version == "" {
		info.Version = BuildVersion()
	}
	a.loggerFor(ctx).Info("health check", zap.String("host", info.Host), zap.Int("pid", info.PID),
		zap.String("version", info.Version))
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
