package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/backupcycle/backupcycle/internal/config"
	"github.com/backupcycle/backupcycle/internal/s3test"
)

// requestLog is a proxy in front of versitygw that records each request
// (method and path, with the query's keys).
type requestLog struct {
	mu   sync.Mutex
	seen []string
}

func (l *requestLog) handler(t *testing.T, target string) http.Handler {
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(u)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var keys []string
		for k := range r.URL.Query() {
			keys = append(keys, k)
		}
		l.mu.Lock()
		l.seen = append(l.seen, strings.TrimSpace(r.Method+" "+r.URL.Path+" "+strings.Join(keys, ",")))
		l.mu.Unlock()
		proxy.ServeHTTP(w, r)
	})
}

func (l *requestLog) requests() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.seen...)
}

// At start (and at each reload) the worker only opens an object store, one
// HEAD of the bucket: its immutability probe, which writes a locked object
// each time, and its privilege checks are `starter preflight`'s and the
// probe's before a copy (once a day), never a start's.
func TestStartupPreflightOnlyOpensTheObjectStore(t *testing.T) {
	srv := s3test.Start(t)
	const user, secret = "backupworker", "backupworker-secret-1"
	if err := srv.WorkerBucket(context.Background(), "worm", user, secret); err != nil {
		t.Fatal(err)
	}
	var log requestLog
	front := httptest.NewServer(log.handler(t, srv.Endpoint))
	t.Cleanup(front.Close)
	t.Setenv("WORKER_PREFLIGHT_TEST_S3", secret)
	cfg := &config.Config{File: "test.yaml",
		BackupServers: []config.BackupServer{{Name: "vault01", Kind: config.KindS3, MaxConcurrent: 1,
			S3: &config.S3{Endpoint: front.URL, Region: "us-east-1", Bucket: "worm", Prefix: "sets/", PathStyle: true, AccessKeyID: user,
				SecretAccessKeyEnv: "WORKER_PREFLIGHT_TEST_S3", LockMode: config.LockGovernance}}},
	}
	core, logs := observer.New(zapcore.InfoLevel)
	stop := startupPreflight(context.Background(), cfg, zap.New(core))
	deadline := time.Now().Add(time.Minute)
	for logs.FilterMessageSnippet("preflight: ").FilterLevelExact(zapcore.InfoLevel).Len() == 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	stop()
	got := log.requests()
	if len(got) != 1 || got[0] != "HEAD /worm" {
		t.Errorf("requests to the object store at start: %q, want one HEAD /worm", got)
	}
	if logs.FilterMessage("preflight: permission missing").Len() != 0 {
		t.Errorf("missing checks logged: %v", logs.All())
	}
}
