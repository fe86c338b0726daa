package main

import (
	"context"
	"database/sql"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	_ "github.com/microsoft/go-mssqldb"
)

func TestParseDB(t *testing.T) {
	spec, err := parseDB("Sales:2GiB:4files")
	if err != nil || spec.Name != "Sales" || spec.Size != 2<<30 || spec.DataFiles != 4 {
		t.Fatalf("parseDB = %+v, %v", spec, err)
	}
	spec, err = parseDB("Tiny")
	if err != nil || spec.Size != 64<<20 || spec.DataFiles != 1 {
		t.Fatalf("parseDB defaults = %+v, %v", spec, err)
	}
	for _, bad := range []string{":1GiB", "X:lots", "X:1GiB:zero", "X:1GiB:0", "X:1:2:3"} {
		if _, err := parseDB(bad); err == nil {
			t.Errorf("parseDB(%q) accepted", bad)
		}
	}
}

func TestParseSize(t *testing.T) {
	for in, want := range map[string]int64{"1048576": 1 << 20, "512KiB": 512 << 10, "100MiB": 100 << 20, "2GiB": 2 << 30, "1GB": 1e9, "0": 0, "1.5MiB": 3 << 19} {
		if got, err := parseSize(in); err != nil || got != want {
			t.Errorf("parseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	if _, err := parseSize("fast"); err == nil {
		t.Error("parseSize accepted junk")
	}
}

func TestRunNeedsDataDir(t *testing.T) {
	err := run([]string{"--listen", "127.0.0.1:0"})
	if err == nil || !strings.Contains(err.Error(), "--data is required") {
		t.Fatalf("run without --data: %v", err)
	}
	err = run([]string{"--data", t.TempDir(), "--share", "nodir"})
	if err == nil || !strings.Contains(err.Error(), "PREFIX=DIR") {
		t.Fatalf("run with a bad --share: %v", err)
	}
}

// TestCommand runs the command end to end: it creates the database, serves
// it over TDS, crashes on SIGUSR1, comes back on SIGUSR2 and stops on SIGINT.
func TestCommand(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	dir := t.TempDir()
	done := make(chan error, 1)
	go func() {
		done <- run([]string{"--listen", addr, "--data", filepath.Join(dir, "data"), "--share", `\\bak01\backup=` + filepath.Join(dir, "bak"),
			"--login", "sa=Pw0rd!", "--db", "Sales:8MiB:2files"})
	}()
	db, err := sql.Open("sqlserver", "sqlserver://sa:Pw0rd%21@"+addr+"?database=master&encrypt=disable")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ping := func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		return db.PingContext(ctx)
	}
	waitUntil(t, func() bool { return ping() == nil })
	var n int64
	if err := db.QueryRow("SELECT COUNT_BIG(*) FROM [Sales].[dbo].[Orders]").Scan(&n); err != nil || n <= 0 {
		t.Fatalf("rows %d, %v", n, err)
	}
	if _, err := db.Exec(`BACKUP DATABASE [Sales] TO DISK = N'\\bak01\backup\s.bak' WITH INIT`); err != nil {
		t.Fatal(err)
	}
	syscall.Kill(os.Getpid(), syscall.SIGUSR1)
	waitUntil(t, func() bool { db.SetMaxIdleConns(0); return ping() != nil })
	db.SetMaxIdleConns(2)
	syscall.Kill(os.Getpid(), syscall.SIGUSR2)
	waitUntil(t, func() bool { return ping() == nil })
	syscall.Kill(os.Getpid(), syscall.SIGINT)
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("command did not stop on SIGINT")
	}
}

func waitUntil(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met in time")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestParsePrincipals(t *testing.T) {
	ls, err := parsePrincipals([]string{"backup=Pw;db=Sales;lang=Deutsch", "ro=x"},
		[]string{"backup:VIEW SERVER STATE", "BACKUP:Sales:db_backupoperator", "backup:msdb:db_datareader"})
	if err != nil {
		t.Fatal(err)
	}
	b := ls[0]
	if len(ls) != 2 || b.Name != "backup" || b.Password != "Pw" || b.DefaultDatabase != "Sales" || b.DefaultLanguage != "Deutsch" ||
		b.Sysadmin || len(b.Server) != 1 || b.Server[0] != "VIEW SERVER STATE" ||
		b.Databases["Sales"][0] != "db_backupoperator" || b.Databases["msdb"][0] != "db_datareader" {
		t.Fatalf("parsePrincipals = %+v", ls)
	}
	for _, bad := range [][2][]string{
		{{"nopassword"}, nil},
		{{"a=b;color=red"}, nil},
		{{"a=b"}, {"nobody:VIEW SERVER STATE"}},
		{{"a=b"}, {"a"}},
		{{"a=b"}, {"a:x:y:z"}},
	} {
		if _, err := parsePrincipals(bad[0], bad[1]); err == nil {
			t.Errorf("parsePrincipals(%q, %q) accepted", bad[0], bad[1])
		}
	}
}
