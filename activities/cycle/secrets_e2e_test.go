package cycle_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
	"go.yaml.in/yaml/v3"

	"github.com/backupcycle/backupcycle/internal/config"
	"github.com/backupcycle/backupcycle/internal/preflight"
	"github.com/backupcycle/backupcycle/internal/sitetest"
	"github.com/backupcycle/backupcycle/workflows"
)

// No password the configuration points at reaches what the product writes
// down: the loaded configuration however it is printed or encoded, the
// workflow's input, the histories of a verified cycle and of one stopped
// by a password file others may read (inputs, results, errors), the
// worker's log, and the preflight report. The SQL password comes from an
// environment variable and a file, the SMB password from a file.
func TestE2ESecretsReachNoHistoryLogOrReport(t *testing.T) {
	f := newSambaFixture(t, "Sales", "")
	cfg := f.Config()
	sqlSecret, smbSecret := sitetest.Password, os.Getenv(sitetest.SMBPasswordEnv)
	if smbSecret == "" {
		t.Fatal("the Samba fixture set no SMB password")
	}
	dir := t.TempDir()
	writeSecret := func(name, value string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(value+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	verifyFile := writeSecret("verify.password", sqlSecret)
	cfg.SQLInstances[1].Password = config.SecretRef{File: verifyFile}
	for i := range cfg.BackupServers {
		cfg.BackupServers[i].SMB.Password = config.SecretRef{File: writeSecret(cfg.BackupServers[i].Name+".password", smbSecret)}
	}
	core, logs := observer.New(zapcore.DebugLevel)
	f.Acts().Log = zap.New(core)

	var seen []string // everything written down, with where it comes from
	see := func(what string, v any) { seen = append(seen, what+": "+fmt.Sprint(v)) }

	// The configuration, every way it may be printed or encoded.
	js, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ym, err := yaml.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	see("config", fmt.Sprintf("%v\n%+v\n%#v\n%s\n%s", *cfg, *cfg, *cfg, js, ym))
	// The workflow's input, as the data converter puts it into the history.
	in := workflows.CycleInput{Database: cfg.Databases[0].Name, Instance: cfg.Databases[0].Instance}
	payloads, err := converter.GetDefaultDataConverter().ToPayloads(in)
	if err != nil {
		t.Fatal(err)
	}
	see("workflow input", payloads)

	e := newE2E(t, f, nil)
	_, run, err := e.cycle("Sales")
	if err != nil {
		t.Fatalf("cycle with the passwords in files: %v", err)
	}
	see("verified cycle's history", history(t, e.c, run))

	// A password file other users may read stops the cycle at the step
	// that needs it, with an error naming the file, not its content.
	if err := os.Chmod(verifyFile, 0o644); err != nil {
		t.Fatal(err)
	}
	_, run, err = e.cycle("Sales")
	if err == nil || !strings.Contains(err.Error(), verifyFile+" has mode 0644") {
		t.Errorf("cycle with a world-readable password file: %v, want the file and its mode named", err)
	}
	see("failed cycle's error", err)
	failed := history(t, e.c, run)
	if !strings.Contains(failed, verifyFile) {
		t.Errorf("the failed cycle's history does not name %s: the history is not read as recorded", verifyFile)
	}
	see("failed cycle's history", failed)
	if err := os.Chmod(verifyFile, 0o600); err != nil {
		t.Fatal(err)
	}

	// The preflight report, with a wrong password on one instance: the
	// driver's error about it is quoted.
	t.Setenv(sitetest.PasswordEnv, "Wr0ng-"+sqlSecret)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	r, err := preflight.Run(ctx, preflight.Options{Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	var text, rjs bytes.Buffer
	if err := r.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	if err := r.WriteJSON(&rjs); err != nil {
		t.Fatal(err)
	}
	r.Log(zap.New(core))
	if !strings.Contains(text.String(), "login") && !strings.Contains(text.String(), "Login") {
		t.Errorf("the report does not mention the failed login:\n%s", text.String())
	}
	see("preflight report", text.String()+rjs.String())

	for _, l := range logs.All() {
		b, _ := json.Marshal(l.ContextMap())
		see("log", l.Message+" "+string(b))
	}
	if len(logs.All()) == 0 {
		t.Error("nothing was logged: the log was not captured")
	}
	for _, s := range seen {
		for _, secret := range []string{sqlSecret, smbSecret, "Wr0ng-" + sqlSecret} {
			if strings.Contains(s, secret) {
				t.Errorf("a password is written down in %.300s", s)
			}
		}
	}
}

// history is every event of a run, as text (payloads included, as the
// Web UI and tctl show them).
func history(t *testing.T, c client.Client, run client.WorkflowRun) string {
	t.Helper()
	var b strings.Builder
	it := c.GetWorkflowHistory(context.Background(), run.GetID(), run.GetRunID(), false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			t.Fatal(err)
		}
		b.WriteString(ev.String())
		b.WriteByte('\n')
	}
	return b.String()
}
