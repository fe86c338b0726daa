// Command sqlsim runs the SQL Server emulator on its own, for poking at it
// by hand with sqlcmd-like tools or the product:
//
//	go run ./internal/sqlsim/cmd/sqlsim --listen 127.0.0.1:14330 --data /tmp/sqlsim \
//	    --share '\\bak01\backup=/tmp/bak01' --login sa=Passw0rd! --db Sales:2GiB:4files
//
// --principal adds a login with only the permissions --grant gives it
// (e.g. --principal 'backup=Pw;db=master;lang=Deutsch' --grant
// 'backup:VIEW SERVER STATE' --grant 'backup:Sales:db_backupoperator');
// --edition, --major-version, --collation and --tls on|strict set what the
// server is.
//
// It runs until SIGINT/SIGTERM. SIGUSR1 crashes the instance (connections
// dropped, work cut short), SIGUSR2 starts it again. Databases survive
// restarts of the command: they live in --data.
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"go.uber.org/zap"

	"github.com/backupcycle/backupcycle/internal/logging"
	"github.com/backupcycle/backupcycle/internal/sqlsim"
)

// multi is a repeatable string flag.
type multi []string

func (m *multi) String() string     { return strings.Join(*m, ",") }
func (m *multi) Set(v string) error { *m = append(*m, v); return nil }

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "sqlsim:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("sqlsim", flag.ContinueOnError)
	listen := fs.String("listen", "127.0.0.1:14330", "address to listen on")
	data := fs.String("data", "", "data directory (databases, catalog); required")
	name := fs.String("name", "sqlsim", "server name (@@SERVERNAME)")
	memory := fs.String("memory", "1GiB", "memory budget for BUFFERCOUNT x MAXTRANSFERSIZE (error 701 beyond)")
	throttle := fs.String("throttle", "0", "bytes/s per backup/restore stream (e.g. 100MiB), 0 = unlimited")
	crashAt := fs.String("crash-at", "", "crash at OP:PERCENT of the next operation, OP = BACKUP, RESTORE or DBCC (e.g. BACKUP:40)")
	dropAt := fs.String("drop-at", "", "close the connection running the next operation at OP:PERCENT (e.g. RESTORE:60), as a network failure: the server and the statement keep running")
	edition := fs.String("edition", "Developer", "edition: Enterprise, Developer, Standard, Web or Express")
	major := fs.Int("major-version", 16, "major version: 13 (2016), 14 (2017), 15 (2019) or 16 (2022)")
	productVersion := fs.String("product-version", "", "build of the major version, e.g. 15.0.4198.2 (2019 CU15); default the newest known")
	collation := fs.String("collation", "", "server collation (default "+sqlsim.DefaultCollation+"); _CS_AS, _BIN or _BIN2 make database names case-sensitive")
	tlsMode := fs.String("tls", "", `encryption: "" (none), "on" (TDS 7.x, required) or "strict" (TDS 8.0)`)
	tz := fs.String("timezone", "", "server time zone (IANA name, default UTC)")
	var shares, logins, dbs, shareThrottle, quotas, unreachable, principals, grants multi
	fs.Var(&shares, "share", `share mapping PREFIX=DIR, e.g. '\\bak01\backup=/srv/bak01' (repeatable)`)
	fs.Var(&logins, "login", "SQL login USER=PASSWORD (repeatable; default sa with an empty password)")
	fs.Var(&dbs, "db", "database to create if absent NAME:SIZE:NFILES, e.g. Sales:2GiB:4files (repeatable)")
	fs.Var(&shareThrottle, "share-throttle", "bytes/s for all streams to a share PREFIX=RATE (repeatable)")
	fs.Var(&quotas, "quota", "byte quota of a share PREFIX=SIZE; beyond it BACKUP fails with 3202 (repeatable)")
	fs.Var(&unreachable, "unreachable", "share PREFIX that answers like an unreachable host (repeatable)")
	fs.Var(&principals, "principal", "login without sysadmin USER=PASSWORD[;db=DEFAULTDB][;lang=LANGUAGE] (repeatable)")
	fs.Var(&grants, "grant", "permission or role of a --principal: USER:SERVERPERM or USER:DB:DBPERM (repeatable)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *data == "" {
		return errors.New("--data is required: give a directory for the databases and the catalog")
	}
	log, err := logging.New(true)
	if err != nil {
		return err
	}
	defer log.Sync()
	cfg := sqlsim.Config{Name: *name, ListenAddr: *listen, DataDir: *data, Logger: log, Shares: map[string]string{}}
	if cfg.MemoryBudget, err = parseSize(*memory); err != nil {
		return fmt.Errorf("--memory: %w", err)
	}
	for _, s := range shares {
		k, v, ok := strings.Cut(s, "=")
		if !ok {
			return fmt.Errorf(`--share %q: want PREFIX=DIR, e.g. '\\bak01\backup=/srv/bak01'`, s)
		}
		if err := os.MkdirAll(v, 0o755); err != nil {
			return fmt.Errorf("--share %q: %w", s, err)
		}
		cfg.Shares[k] = v
	}
	if len(logins) > 0 {
		cfg.Logins = map[string]string{}
		for _, l := range logins {
			u, p, ok := strings.Cut(l, "=")
			if !ok || u == "" {
				return fmt.Errorf("--login %q: want USER=PASSWORD", l)
			}
			cfg.Logins[u] = p
		}
	}
	cfg.Edition, cfg.MajorVersion, cfg.ProductVersion, cfg.TLS, cfg.Collation = *edition, *major, *productVersion, *tlsMode, *collation
	fs.Visit(func(f *flag.Flag) {
		if f.Name == "product-version" && !flagSet(fs, "major-version") {
			cfg.MajorVersion = 0 // the major comes from the build
		}
	})
	if *tz != "" {
		if cfg.TimeZone, err = time.LoadLocation(*tz); err != nil {
			return fmt.Errorf("--timezone %q: %w", *tz, err)
		}
	}
	if cfg.Principals, err = parsePrincipals(principals, grants); err != nil {
		return err
	}
	in, err := sqlsim.New(cfg)
	if err != nil {
		return err
	}
	for _, d := range dbs {
		spec, err := parseDB(d)
		if err != nil {
			return err
		}
		if _, err := in.DatabaseFiles(spec.Name); err == nil {
			continue // already there from an earlier run
		}
		log.Info("creating database", zap.String("db", spec.Name), zap.Int64("bytes", spec.Size), zap.Int("files", spec.DataFiles))
		if err := in.CreateDatabase(spec); err != nil {
			return err
		}
	}
	rate, err := parseSize(*throttle)
	if err != nil {
		return fmt.Errorf("--throttle: %w", err)
	}
	in.SetThrottle(rate)
	for _, s := range shareThrottle {
		k, v, _ := strings.Cut(s, "=")
		r, err := parseSize(v)
		if err != nil {
			return fmt.Errorf("--share-throttle %q: %w", s, err)
		}
		in.SetShareThrottle(k, r)
	}
	for _, s := range quotas {
		k, v, _ := strings.Cut(s, "=")
		q, err := parseSize(v)
		if err != nil {
			return fmt.Errorf("--quota %q: %w", s, err)
		}
		in.SetShareQuota(k, q)
	}
	for _, p := range unreachable {
		in.SetShareUnreachable(p, true)
	}
	for _, f := range []struct {
		flag, val string
		arm       func(string, float64) error
	}{{"crash-at", *crashAt, in.CrashAt}, {"drop-at", *dropAt, in.DropConnectionAt}} {
		if f.val == "" {
			continue
		}
		op, pct, ok := strings.Cut(f.val, ":")
		p, err := strconv.ParseFloat(pct, 64)
		if !ok || err != nil {
			return fmt.Errorf("--%s %q: want OP:PERCENT, e.g. BACKUP:40", f.flag, f.val)
		}
		if err := f.arm(op, p); err != nil {
			return err
		}
	}
	if err := in.Start(); err != nil {
		return err
	}
	fmt.Printf("sqlsim %s listening on %s\n", *name, in.Addr())
	if cfg.TLS != "" {
		fmt.Printf("TLS %s; certificate: %s\n", cfg.TLS, filepath.Join(*data, "sqlsim-cert.pem"))
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM, syscall.SIGUSR1, syscall.SIGUSR2)
	for s := range sig {
		switch s {
		case syscall.SIGUSR1:
			log.Warn("crashing the instance (SIGUSR1)")
			in.Crash()
		case syscall.SIGUSR2:
			if err := in.Start(); err != nil {
				log.Error("restart", zap.Error(err))
			}
		default:
			return in.Stop()
		}
	}
	return nil
}

// parseDB reads NAME[:SIZE[:NFILES]] (NFILES like 4 or 4files).
func parseDB(s string) (sqlsim.DatabaseSpec, error) {
	parts := strings.Split(s, ":")
	spec := sqlsim.DatabaseSpec{Name: parts[0], Size: 64 << 20, DataFiles: 1}
	if spec.Name == "" {
		return spec, fmt.Errorf("--db %q: the name is empty; want NAME:SIZE:NFILES, e.g. Sales:2GiB:4files", s)
	}
	if len(parts) > 1 {
		n, err := parseSize(parts[1])
		if err != nil {
			return spec, fmt.Errorf("--db %q: %w", s, err)
		}
		spec.Size = n
	}
	if len(parts) > 2 {
		n, err := strconv.Atoi(strings.TrimSuffix(strings.ToLower(parts[2]), "files"))
		if err != nil || n < 1 {
			return spec, fmt.Errorf("--db %q: file count %q must be a positive number like 4 or 4files", s, parts[2])
		}
		spec.DataFiles = n
	}
	if len(parts) > 3 {
		return spec, fmt.Errorf("--db %q: want NAME:SIZE:NFILES", s)
	}
	return spec, nil
}

// parseSize reads a byte count: 1048576, 512KiB, 100MiB, 2GiB, 1GB, 10MB.
func parseSize(s string) (int64, error) {
	units := []struct {
		suffix string
		mult   int64
	}{{"KIB", 1 << 10}, {"MIB", 1 << 20}, {"GIB", 1 << 30}, {"TIB", 1 << 40}, {"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12}, {"B", 1}}
	u := strings.ToUpper(strings.TrimSpace(s))
	mult := int64(1)
	for _, x := range units {
		if strings.HasSuffix(u, x.suffix) {
			u, mult = strings.TrimSpace(strings.TrimSuffix(u, x.suffix)), x.mult
			break
		}
	}
	f, err := strconv.ParseFloat(u, 64)
	if err != nil || f < 0 {
		return 0, fmt.Errorf("size %q is not a byte count like 1048576, 100MiB or 2GiB", s)
	}
	return int64(f * float64(mult)), nil
}

// parsePrincipals reads --principal USER=PASSWORD[;db=DB][;lang=LANG] and
// --grant USER:PERM (server) or USER:DB:PERM (database).
func parsePrincipals(principals, grants []string) ([]sqlsim.Login, error) {
	var out []sqlsim.Login
	byName := map[string]int{}
	for _, p := range principals {
		parts := strings.Split(p, ";")
		user, pass, ok := strings.Cut(parts[0], "=")
		if !ok || user == "" {
			return nil, fmt.Errorf("--principal %q: want USER=PASSWORD[;db=DB][;lang=LANGUAGE]", p)
		}
		l := sqlsim.Login{Name: user, Password: pass, Databases: map[string][]string{}}
		for _, opt := range parts[1:] {
			k, v, _ := strings.Cut(opt, "=")
			switch strings.ToLower(k) {
			case "db":
				l.DefaultDatabase = v
			case "lang":
				l.DefaultLanguage = v
			default:
				return nil, fmt.Errorf("--principal %q: unknown option %q; use db= or lang=", p, k)
			}
		}
		byName[strings.ToLower(user)] = len(out)
		out = append(out, l)
	}
	for _, g := range grants {
		parts := strings.Split(g, ":")
		i, ok := byName[strings.ToLower(parts[0])]
		if !ok || len(parts) < 2 || len(parts) > 3 {
			return nil, fmt.Errorf("--grant %q: want USER:SERVERPERM or USER:DB:DBPERM for a --principal USER", g)
		}
		if len(parts) == 2 {
			out[i].Server = append(out[i].Server, parts[1])
			continue
		}
		out[i].Databases[parts[1]] = append(out[i].Databases[parts[1]], parts[2])
	}
	return out, nil
}

// flagSet reports whether the command line gave flag name.
func flagSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}
