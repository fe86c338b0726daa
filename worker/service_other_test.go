//go:build !windows

package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// Elsewhere than on Windows the service mode says where the systemd unit
// is.
func TestServiceModeElsewhere(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "backupcycle.yaml")
	if err := os.WriteFile(cfg, []byte("{}"), 0o600); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	if code := run(context.Background(), []string{"service", "install", "--config", cfg}, &out, &errb); code != exitFail ||
		!strings.Contains(errb.String(), "deploy/systemd/backupcycle-worker.service") {
		t.Errorf("service install on %s: exit %d, %q", runtime.GOOS, code, errb.String())
	}
}
