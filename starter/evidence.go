package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/backupcycle/backupcycle/internal/catalog"
	"github.com/backupcycle/backupcycle/internal/config"
	"github.com/backupcycle/backupcycle/internal/evidence"
	"github.com/backupcycle/backupcycle/internal/evidence/chart"
	"github.com/backupcycle/backupcycle/internal/status"
	"github.com/backupcycle/backupcycle/internal/storage/location"
	"github.com/backupcycle/backupcycle/internal/storage/s3"
	"github.com/backupcycle/backupcycle/internal/tsql"
)

// evidenceCommand is `starter evidence`: the evidence ledger's verify,
// report and keygen.
func evidenceCommand(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "evidence",
		Short: "the evidence ledger: verify its chains, report what was proven when, make a signing key",
		Long: `The evidence ledger (README "Evidence ledger"): every verified set, log proof and drill appends a
record, hash-chained and signed with the workers' Ed25519 key, beside the manifests of each backup server.
These commands read it with the public keys of the configuration's evidence: section; they need no
private key and no Temporal.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return usageError{msg: "give a subcommand: verify, report or keygen"}
		},
	}
	cmd.AddCommand(evidenceVerifyCommand(e), evidenceReportCommand(e), evidenceKeygenCommand(e))
	return cmd
}

func evidenceVerifyCommand(e *env) *cobra.Command {
	var database, instance string
	var quick, asJSON bool
	cmd := &cobra.Command{
		Use:   "verify",
		Short: "check every ledger's chain and signatures and the files its records name; exit 1 naming the first record that does not match",
		Long: `Walks the ledger of every database (or --database) on every backup server: records numbered from 1
without a gap, each naming the SHA-256 of the one before, each signed under one of evidence.public_keys,
and the files each vouches for (a set's manifest and stripes) still of the size and SHA-256 recorded.
Reading every stripe takes as long as reading the backups; --quick hashes the manifests and checks only
the stripes' sizes. A set whose manifest retention removed is counted as removed, not as a mismatch.
Exit 0 when every record matched, 1 naming each record that does not (the first one first).`,
		Args: noArgs,
		RunE: action(func(ctx context.Context, cmd *cobra.Command, args []string) error {
			c, err := e.requireConfig(cmd)
			if err != nil {
				return err
			}
			sc, err := scanLedgers(ctx, e, c, instance, database, quick)
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			if asJSON {
				if err := writeJSON(w, sc); err != nil {
					return err
				}
			} else {
				writeVerify(w, sc)
			}
			return sc.err()
		}),
	}
	cmd.Flags().StringVar(&database, "database", "", "only this database (exact name)")
	cmd.Flags().StringVar(&instance, "instance", "", "only the database of this instance (with --database)")
	cmd.Flags().BoolVar(&quick, "quick", false, "hash the manifests, check only the stripes' sizes")
	jsonFlag(cmd, &asJSON, "print the result")
	return cmd
}

func evidenceReportCommand(e *env) *cobra.Command {
	var database, instance, from, to, html string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "report",
		Short: "per database: when last proven restorable, how often in --from..--to, whether each drill met the RTO",
		Long: `Answers an auditor from the ledgers, after verifying them as ` + "`evidence verify --quick`" + ` does (a
record that does not match is not counted, and the command exits 1 naming it): per database, when it was
last proven restorable and the recovery point proven, how many sets were verified, log proofs made and
drills run in the period, each drill's measured time to recover against its rto. --html FILE writes the
same as a page with a chart per database of the proven recovery point over time.
--from and --to are dates (2026-11-01, the whole day in UTC) or RFC 3339 instants.`,
		Args: noArgs,
		RunE: action(func(ctx context.Context, cmd *cobra.Command, args []string) error {
			c, err := e.requireConfig(cmd)
			if err != nil {
				return err
			}
			f, err := parseWhen("--from", from, false)
			if err != nil {
				return err
			}
			t, err := parseWhen("--to", to, true)
			if err != nil {
				return err
			}
			if t.Before(f) {
				return usageError{msg: fmt.Sprintf("--to %s is before --from %s", to, from)}
			}
			sc, err := scanLedgers(ctx, e, c, instance, database, true)
			if err != nil {
				return err
			}
			var records []evidence.Record
			for _, r := range sc.Ledgers {
				records = append(records, r.Verified...)
			}
			rep := evidence.Summarize(records, f, t)
			if html != "" {
				page, err := chart.HTML(rep)
				if err != nil {
					return err
				}
				if err := os.WriteFile(html, page, 0o644); err != nil {
					return fmt.Errorf("write the report: %w", err)
				}
			}
			w := cmd.OutOrStdout()
			if asJSON {
				if err := writeJSON(w, struct {
					evidence.Report
					Problems []ledgerProblem `json:"problems,omitempty"`
					Unread   []string        `json:"unread_servers,omitempty"`
				}{rep, sc.problems(), sc.Unread}); err != nil {
					return err
				}
			} else {
				writeReport(w, rep)
				writeProblems(w, sc)
			}
			return sc.err()
		}),
	}
	cmd.Flags().StringVar(&database, "database", "", "only this database (exact name)")
	cmd.Flags().StringVar(&instance, "instance", "", "only the database of this instance (with --database)")
	cmd.Flags().StringVar(&from, "from", "", "start of the period: a date (UTC) or an RFC 3339 instant (required)")
	cmd.Flags().StringVar(&to, "to", "", "end of the period, included (required)")
	cmd.Flags().StringVar(&html, "html", "", "also write the report as an HTML page with charts to this file")
	jsonFlag(cmd, &asJSON, "print the report")
	return cmd
}

func evidenceKeygenCommand(e *env) *cobra.Command {
	var out string
	cmd := &cobra.Command{
		Use:   "keygen",
		Short: "make an Ed25519 signing key for the ledger: the key into --out (owner-only), its public key on stdout",
		Long: `Writes a new signing key (base64 of a PKCS #8 Ed25519 key, on one line) to --out, a new file readable by
its owner only, for the workers' evidence.signing_key_file (or the variable of signing_key_env), and prints
its public key for evidence.public_keys. The key is never printed.`,
		Args: noArgs,
		RunE: action(func(ctx context.Context, cmd *cobra.Command, args []string) error {
			if out == "" {
				return usageError{msg: "--out FILE is required: the new file the signing key is written to"}
			}
			key, enc, err := evidence.GenerateKey()
			if err != nil {
				return err
			}
			f, err := os.OpenFile(out, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
			if err != nil {
				return fmt.Errorf("create %s for the signing key (it must not exist yet): %w", out, err)
			}
			if _, err := fmt.Fprintln(f, enc); err != nil {
				f.Close()
				return fmt.Errorf("write %s: %w", out, err)
			}
			if err := f.Close(); err != nil {
				return fmt.Errorf("write %s: %w", out, err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s\n", key.Public())
			fmt.Fprintf(e.stderr, "evidence: signing key %s written to %s; add the line above to evidence.public_keys\n", key.ID(), out)
			return nil
		}),
	}
	cmd.Flags().StringVar(&out, "out", "", "new file for the signing key")
	return cmd
}

// parseWhen reads --from/--to: a date (its start, or with end its last
// instant, in UTC) or an RFC 3339 instant.
func parseWhen(flag, s string, end bool) (time.Time, error) {
	if s == "" {
		return time.Time{}, usageError{msg: flag + " is required: a date such as 2026-11-01 or an RFC 3339 instant"}
	}
	if d, err := time.Parse(time.DateOnly, s); err == nil {
		if end {
			return d.Add(24*time.Hour - time.Nanosecond), nil
		}
		return d, nil
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return time.Time{}, usageError{msg: fmt.Sprintf("%s %q: give a date such as 2026-11-01 or an RFC 3339 instant such as 2026-11-01T06:00:00Z", flag, s)}
	}
	return t.UTC(), nil
}

// ledgerScan is every ledger read.
type ledgerScan struct {
	Ledgers []evidence.Result `json:"ledgers"`
	// Unread are the backup servers that could not be read, and why.
	Unread []string `json:"unread_servers,omitempty"`
	// none is set when --database named a database no ledger holds.
	none string
}

type ledgerProblem struct {
	Server   string `json:"server"`
	Copy     string `json:"copy_on,omitempty"` // the object store, for a problem of a ledger's copy there
	Instance string `json:"instance"`
	Database string `json:"database"`
	evidence.Problem
}

func (s ledgerScan) problems() []ledgerProblem {
	var out []ledgerProblem
	for _, l := range s.Ledgers {
		for _, p := range l.Problems {
			out = append(out, ledgerProblem{Server: l.Server, Copy: l.Copy, Instance: l.Instance, Database: l.Database, Problem: p})
		}
	}
	return out
}

// err is the command's failure: records that do not match, servers not
// read, a database without a ledger.
func (s ledgerScan) err() error {
	var parts []string
	if p := s.problems(); len(p) > 0 {
		first := p[0]
		where := first.Server
		if first.Copy != "" {
			where = first.Copy + " (copy of " + first.Server + ")"
		}
		parts = append(parts, fmt.Sprintf("%d record(s) do not match; the first: %s/%s on %s, %s", len(p),
			first.Instance, tsql.Printable(first.Database), where, tsql.Printable(first.Problem.String())))
	}
	if len(s.Unread) > 0 {
		parts = append(parts, fmt.Sprintf("%d backup server(s) could not be read: %s", len(s.Unread), strings.Join(s.Unread, "; ")))
	}
	if s.none != "" {
		parts = append(parts, s.none)
	}
	if len(parts) == 0 {
		return nil
	}
	return fmt.Errorf("evidence: %s", strings.Join(parts, "; "))
}

// scanLedgers verifies the ledgers of c's databases (or of one) on every
// backup server that holds manifests (object stores hold copies only).
// The databases are those configured and those with sets on the server.
func scanLedgers(ctx context.Context, e *env, c *config.Config, instance, database string, quick bool) (ledgerScan, error) {
	var sc ledgerScan
	if !c.Evidence.Enabled() {
		return sc, fmt.Errorf("%s has no evidence: section with public_keys: the ledger cannot be verified without them (README \"Evidence ledger\")", c.File)
	}
	keys, err := c.Evidence.VerifyKeys()
	if err != nil {
		return sc, err
	}
	if instance != "" && database == "" {
		return sc, usageError{msg: "--instance goes with --database"}
	}
	ctx, cancel := e.withTimeout(ctx, 0)
	defer cancel()
	for i := range c.BackupServers {
		srv := &c.BackupServers[i]
		if srv.IsObjectStore() {
			continue
		}
		results, err := verifyServer(ctx, c, srv, keys, instance, database, quick)
		if err != nil {
			sc.Unread = append(sc.Unread, fmt.Sprintf("%s: %v", srv.Name, err))
			continue
		}
		sc.Ledgers = append(sc.Ledgers, results...)
	}
	// The copies on the object stores: each checked, and each server's
	// ledger held to its copy.
	for i := range c.BackupServers {
		srv := &c.BackupServers[i]
		if !srv.IsObjectStore() {
			continue
		}
		copies, err := verifyCopies(ctx, srv, keys, sc.Ledgers, quick)
		if err != nil {
			sc.Unread = append(sc.Unread, fmt.Sprintf("%s: %v", srv.Name, err))
			continue
		}
		sc.Ledgers = append(sc.Ledgers, copies...)
	}
	// A ledger with no record and nothing against it is no ledger.
	sc.Ledgers = slices.DeleteFunc(sc.Ledgers, func(l evidence.Result) bool { return l.Records == 0 && l.OK() })
	if database != "" && len(sc.Ledgers) == 0 && len(sc.Unread) == 0 {
		sc.none = fmt.Sprintf("no backup server holds a ledger of database %q: check the name (it is exact), and that evidence: was configured when its sets were verified", database)
	}
	return sc, nil
}

// verifyServer verifies the ledgers on one backup server.
func verifyServer(ctx context.Context, c *config.Config, srv *config.BackupServer, keys evidence.PublicKeys, instance, database string,
	quick bool) ([]evidence.Result, error) {
	st, err := location.OpenServer(ctx, srv)
	if err != nil {
		return nil, err
	}
	defer st.Close()
	type key struct{ instance, database string }
	dbs := map[key]bool{}
	for _, d := range c.Databases {
		dbs[key{d.Instance, d.Name}] = true
	}
	// The manifests name the databases selected by pattern, and sets only
	// need to be read by name here: their authentication is the ledger's.
	l, err := catalog.ListInstances(ctx, catalog.StorageFS{Storage: st}, nil, status.InstancesOf(c))
	if err != nil {
		return nil, err
	}
	for _, m := range l.Manifests {
		dbs[key{m.SourceInstance, m.Database}] = true
	}
	var out []evidence.Result
	for k := range dbs {
		if database != "" && (k.database != database || instance != "" && k.instance != instance) {
			continue
		}
		res, err := evidence.Verify(ctx, st, k.instance, k.database, evidence.Options{Keys: keys, Server: srv.Name, Quick: quick})
		if err != nil {
			return nil, err
		}
		// Empty ones too: a copy elsewhere may hold what was removed here.
		out = append(out, res)
	}
	sort.Slice(out, func(i, j int) bool {
		return out[i].Instance+"\x00"+out[i].Database < out[j].Instance+"\x00"+out[j].Database
	})
	return out, nil
}

// verifyCopies verifies the copies on the object store srv of the
// ledgers read (and the sets' files there), and holds each ledger to its
// copy (evidence.Result.Compare).
func verifyCopies(ctx context.Context, srv *config.BackupServer, keys evidence.PublicKeys, ledgers []evidence.Result, quick bool) ([]evidence.Result, error) {
	store, err := location.OpenObjectStore(ctx, srv, s3.Lock{})
	if err != nil {
		return nil, err
	}
	defer store.Close()
	var out []evidence.Result
	for i := range ledgers {
		l := &ledgers[i]
		if l.Copy != "" {
			continue
		}
		cp, err := evidence.Verify(ctx, store, l.Instance, l.Database, evidence.Options{Keys: keys, Server: l.Server,
			Dir: evidence.ImmutableDir(l.Server, l.Instance, l.Database), Copy: true, Quick: quick})
		if err != nil {
			return nil, err
		}
		if cp.Records == 0 {
			continue
		}
		cp.Copy = srv.Name
		l.Compare(cp)
		out = append(out, cp)
	}
	return out, nil
}

func writeVerify(w io.Writer, sc ledgerScan) {
	for _, l := range sc.Ledgers {
		db := l.Instance + "/" + tsql.Printable(l.Database)
		where := l.Server
		if l.Copy != "" {
			where = l.Copy + " (copy of " + l.Server + ")"
		}
		if l.OK() {
			line := fmt.Sprintf("OK    %s %s: %d record(s), head %d (sha256 %s)", where, db, l.Records, l.Head, l.HeadHash)
			if len(l.Removed) > 0 {
				line += fmt.Sprintf("; %d record(s) of sets since removed by retention", len(l.Removed))
			}
			if l.Pending {
				line += fmt.Sprintf("; record %d is being written", l.Records)
			}
			fmt.Fprintln(w, line)
			continue
		}
		fmt.Fprintf(w, "FAIL  %s %s: %d record(s), %d do not match\n", where, db, l.Records, len(l.Problems))
		for _, p := range l.Problems {
			fmt.Fprintf(w, "      %s\n", tsql.Printable(p.String()))
		}
	}
	for _, u := range sc.Unread {
		fmt.Fprintf(w, "SERVER %s\n", u)
	}
}

func writeProblems(w io.Writer, sc ledgerScan) {
	for _, p := range sc.problems() {
		fmt.Fprintf(w, "NOT COUNTED %s %s/%s: %s\n", p.Server, p.Instance, tsql.Printable(p.Database), tsql.Printable(p.Problem.String()))
	}
	for _, u := range sc.Unread {
		fmt.Fprintf(w, "SERVER %s\n", u)
	}
}

func writeReport(w io.Writer, r evidence.Report) {
	day := func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04 UTC") }
	fmt.Fprintf(w, "evidence from %s to %s\n", day(r.From), day(r.To))
	for _, d := range r.Databases {
		db := d.Instance + "/" + tsql.Printable(d.Database)
		last := "never proven restorable"
		if !d.LastProven.IsZero() {
			last = fmt.Sprintf("last proven restorable %s (%s, recovery point %s)", day(d.LastProven), d.LastKind, day(d.LastRecoveryPoint))
		}
		fmt.Fprintf(w, "%s: %s; in the period %d verified set(s), %d log proof(s), %d drill(s)", db, last, d.Sets, d.LogProofs, len(d.DrillResults))
		if n := len(d.DrillResults); n > 0 {
			fmt.Fprintf(w, " (%d met the RTO, %d did not)", d.MetRTO, d.MissedRTO)
		}
		fmt.Fprintln(w)
		for _, l := range d.DrillResults {
			verdict := "met"
			switch {
			case !l.Passed:
				verdict = "FAILED"
			case !l.MetRTO:
				verdict = "MISSED"
			}
			target := "no rto set"
			if l.TargetRTOSeconds > 0 {
				target = "rto " + seconds(l.TargetRTOSeconds).String()
			}
			from := ""
			if im := l.Immutable; im != nil {
				from = fmt.Sprintf(" from the immutable copy (set %d on %s, %s)", im.Sequence, im.Store, im.Location)
			}
			fmt.Fprintf(w, "  drill %s%s: recovered in %s, %s: %s\n", day(l.At), from, seconds(l.RTOSeconds), target, verdict)
		}
	}
}

func seconds(s float64) time.Duration {
	return time.Duration(s * float64(time.Second)).Round(time.Second)
}
