package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/backupcycle/backupcycle/internal/catalog"
	"github.com/backupcycle/backupcycle/internal/config"
	"github.com/backupcycle/backupcycle/internal/plan"
	"github.com/backupcycle/backupcycle/internal/status"
	"github.com/backupcycle/backupcycle/internal/tsql"
	"github.com/backupcycle/backupcycle/workflows"
)

// The log chains of a database as the chain records on the backup servers
// hold them (`starter logs --database D` with --config), beside what the
// running chain workflow answers. The records are read with the manifest
// keys, as `status --from-manifests` reads the manifests: an untrusted
// record is named, never shown as the chain.

// shownLogs is how many of a chain's newest log backups the text output
// lists (--all: every one); --json lists every one.
const shownLogs = 20

// logsView is the JSON of `starter logs` with --config.
type logsView struct {
	Instance string             `json:"instance"`
	Database string             `json:"database"`
	Servers  []logsServerJSON   `json:"servers"`
	Chains   []chainJSON        `json:"chains"`
	Workflow *chainWorkflowJSON `json:"workflow"`
}

type logsServerJSON struct {
	Name  string `json:"name"`
	Error string `json:"error,omitempty"`
	// Problems are records that could not be read or are not trusted.
	Problems []string `json:"problems"`
}

type chainFullJSON struct {
	Sequence int64  `json:"sequence"`
	Finish   string `json:"finish"` // RFC 3339, UTC
	Verified bool   `json:"verified"`
	CopyOnly bool   `json:"copy_only"`
}

type chainJSON struct {
	Chain int64           `json:"chain"`
	Base  *chainFullJSON  `json:"base"`
	Fulls []chainFullJSON `json:"fulls"`
	Logs  []chainLogJSON  `json:"logs"`
	// Gaps name every hole a restore from the base meets.
	Gaps  []string        `json:"gaps"`
	Break *chainBreakJSON `json:"break"`
	// Error says why the chain's parts could not be assembled (a part
	// missing or not trusted); its logs are listed from the parts read.
	Error string `json:"error,omitempty"`
}

type chainBreakJSON struct {
	Reason string `json:"reason"`
	Detail string `json:"detail"`
	At     string `json:"at"`
}

type chainLogJSON struct {
	Number   int64  `json:"number"`
	State    string `json:"state"`
	FirstLSN string `json:"first_lsn"`
	LastLSN  string `json:"last_lsn"`
	// Finish is the BACKUP LOG's finish with the source's offset from UTC
	// (RFC 3339); FinishUTC the instant; "" when not recorded.
	Finish           string            `json:"finish"`
	FinishUTC        string            `json:"finish_utc"`
	UTCOffsetMinutes *int              `json:"utc_offset_minutes"`
	Bytes            int64             `json:"bytes"`
	Servers          []string          `json:"servers"`
	Proven           *chainProofJSON   `json:"proven"`
	Foreign          *chainForeignJSON `json:"foreign"`
	Failure          string            `json:"failure,omitempty"`
}

type chainProofJSON struct {
	Mode     string `json:"mode"`
	At       string `json:"at"`
	Instance string `json:"instance"`
	Database string `json:"database"`
}

type chainForeignJSON struct {
	Tool    string `json:"tool"`
	User    string `json:"user"`
	Path    string `json:"path"`
	Adopted bool   `json:"adopted"`
}

// chainWorkflowJSON is the running chain workflow's answer, or why there
// is none.
type chainWorkflowJSON struct {
	ID            string  `json:"id"`
	Error         string  `json:"error,omitempty"`
	State         string  `json:"state,omitempty"`
	Chain         int64   `json:"chain,omitempty"`
	LastLog       int64   `json:"last_log,omitempty"`
	LagSeconds    float64 `json:"lag_seconds"`
	CopiedThrough int64   `json:"copied_through,omitempty"`
	CopyTo        string  `json:"copy_to,omitempty"`
	NextTick      string  `json:"next_tick,omitempty"`
	LastError     string  `json:"last_error,omitempty"`
	CopyError     string  `json:"copy_error,omitempty"`
}

// readChains reads db's chain records from every backup server of cfg. A
// part recorded on several servers (the copy lane records the copy on
// both) is read as those servers know it together, its trusted copies
// merged as status merges them.
func readChains(ctx context.Context, cfg *config.Config, db *config.Database) logsView {
	v := logsView{Instance: db.Instance, Database: db.Name, Servers: []logsServerJSON{}, Chains: []chainJSON{}}
	keys, kerr := cfg.ManifestKeyRing()
	type key struct {
		chain int64
		part  int
	}
	// Every server's copy of each part: merged below, as status reads them
	// (catalog.MergeChainPart: the chain's server has the newest logs, the
	// copy target the newest proofs).
	parts := map[key][]*catalog.ChainRecord{}
	verified := map[string]bool{}
	for i := range cfg.BackupServers {
		srv := &cfg.BackupServers[i]
		s := logsServerJSON{Name: srv.Name, Problems: []string{}}
		if kerr != nil {
			s.Error = fmt.Sprintf("chain records not read: %v: give this command the manifest keys the workers have", kerr)
			v.Servers = append(v.Servers, s)
			continue
		}
		st, err := status.Open(ctx, srv)
		if err != nil {
			s.Error = err.Error()
			v.Servers = append(v.Servers, s)
			continue
		}
		fsys := catalog.StorageFS{Storage: st}
		l, err := catalog.ListChains(ctx, fsys, keys, catalog.Of(db.Instance, db.Name))
		if err == nil {
			// Which fulls are verified sets: their manifests here.
			var ml catalog.Listing
			if ml, err = catalog.ListInstances(ctx, fsys, keys, []string{db.Instance}); err == nil {
				for _, m := range ml.Manifests {
					if m.Trusted() && m.Database == db.Name && m.State == catalog.StateVerified && !m.IsDifferential() && m.Header != nil {
						verified[m.Header.BackupSetGUID] = true
					}
				}
			}
		}
		st.Close()
		if err != nil {
			s.Error = err.Error()
			v.Servers = append(v.Servers, s)
			continue
		}
		for _, name := range sortedKeys(l.Broken) {
			s.Problems = append(s.Problems, fmt.Sprintf("chain record %s cannot be read: %v", name, l.Broken[name]))
		}
		for _, r := range l.Records {
			if !r.Trusted() {
				s.Problems = append(s.Problems, fmt.Sprintf("chain record %s is not trusted and not shown: %s", r.FileName(), r.Auth.Why()))
				continue
			}
			k := key{r.Chain, r.Part}
			parts[k] = append(parts[k], r)
		}
		v.Servers = append(v.Servers, s)
	}
	byChain := map[int64][]*catalog.ChainRecord{}
	for k, rs := range parts {
		byChain[k.chain] = append(byChain[k.chain], catalog.MergeChainPart(rs))
	}
	ids := make([]int64, 0, len(byChain))
	for id := range byChain {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		v.Chains = append(v.Chains, chainOf(id, byChain[id], verified))
	}
	return v
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// chainOf is one chain from its parts: the record's logs (every state),
// the gaps and break the logchain model finds.
func chainOf(id int64, ps []*catalog.ChainRecord, verified map[string]bool) chainJSON {
	sort.Slice(ps, func(i, j int) bool { return ps[i].Part < ps[j].Part })
	c := chainJSON{Chain: id, Fulls: []chainFullJSON{}, Logs: []chainLogJSON{}, Gaps: []string{}}
	for _, p := range ps {
		for _, f := range p.Fulls {
			c.Fulls = append(c.Fulls, chainFullJSON{Sequence: f.Sequence, Finish: rfc3339(f.FinishUTC), Verified: verified[f.BackupSetGUID],
				CopyOnly: f.CopyOnly})
		}
		for _, l := range p.Logs {
			c.Logs = append(c.Logs, logOf(l))
		}
		if b := p.Break; b != nil {
			c.Break = &chainBreakJSON{Reason: b.Reason, Detail: b.Detail, At: rfc3339(b.At)}
		}
	}
	if len(c.Fulls) > 0 {
		c.Base = &c.Fulls[0]
	}
	ch, err := catalog.AssembleChain(ps, verified)
	if err != nil {
		c.Error = err.Error()
		return c
	}
	for _, g := range ch.Gaps() {
		c.Gaps = append(c.Gaps, g.String())
	}
	return c
}

func logOf(l catalog.LogBackup) chainLogJSON {
	o := chainLogJSON{Number: l.Number, State: string(l.State), FirstLSN: l.FirstLSN, LastLSN: l.LastLSN,
		UTCOffsetMinutes: l.UTCOffsetMinutes, Servers: orEmpty(l.Servers), Failure: l.Failure}
	if !l.BackupFinishUTC.IsZero() && l.UTCOffsetMinutes != nil {
		o.Finish = l.BackupFinishUTC.In(time.FixedZone("", *l.UTCOffsetMinutes*60)).Format(time.RFC3339)
		o.FinishUTC = rfc3339(l.BackupFinishUTC)
	} else if !l.BackupFinish.IsZero() {
		// The source's wall clock, its offset not recorded.
		o.Finish = l.BackupFinish.Format("2006-01-02T15:04:05")
	}
	for _, f := range l.Files {
		o.Bytes += f.Size
	}
	if p := l.Proven; p != nil {
		o.Proven = &chainProofJSON{Mode: p.Mode, At: rfc3339(p.At), Instance: p.Instance, Database: p.Database}
	}
	if f := l.Foreign; f != nil {
		o.Foreign = &chainForeignJSON{Tool: f.Tool, User: f.User, Path: f.Path, Adopted: f.Adopted}
	}
	return o
}

// workflowOf is the chain workflow's status as JSON.
func workflowOf(id string, st *workflows.LogChainStatus, err error) *chainWorkflowJSON {
	w := &chainWorkflowJSON{ID: id}
	if err != nil {
		w.Error = err.Error()
		return w
	}
	w.State, w.Chain, w.LastLog, w.LagSeconds = st.State, st.Chain, st.LastLog, secs(st.Lag)
	w.CopiedThrough, w.CopyTo, w.LastError, w.CopyError = st.CopiedThrough, st.CopyTo, st.LastError, st.CopyError
	if !st.NextTick.IsZero() {
		w.NextTick = rfc3339(st.NextTick)
	}
	return w
}

// writeLogsView is the text of the view: names and texts from the
// records escaped (tsql.Printable), so that none can forge a line.
func writeLogsView(w io.Writer, v logsView, all bool) {
	p := tsql.Printable
	fmt.Fprintf(w, "%s@%s: %d log chain(s) on the backup servers\n", p(v.Database), p(v.Instance), len(v.Chains))
	for _, s := range v.Servers {
		if s.Error != "" {
			fmt.Fprintf(w, "SERVER %s: %s\n", s.Name, p(s.Error))
		}
		for _, pr := range s.Problems {
			fmt.Fprintf(w, "SERVER %s: %s\n", s.Name, p(pr))
		}
	}
	chains := v.Chains
	if !all && len(chains) > 1 {
		fmt.Fprintf(w, "(%d older chain(s) not shown: --all)\n", len(chains)-1)
		chains = chains[len(chains)-1:]
	}
	for _, c := range chains {
		fmt.Fprintf(w, "chain %d", c.Chain)
		if c.Base != nil {
			fmt.Fprintf(w, ": base full seq %d finished %s%s", c.Base.Sequence, c.Base.Finish, verifiedText(c.Base.Verified))
		}
		fmt.Fprintln(w)
		for _, f := range c.Fulls[min(1, len(c.Fulls)):] {
			fmt.Fprintf(w, "  full seq %d finished %s%s\n", f.Sequence, f.Finish, verifiedText(f.Verified))
		}
		logs := c.Logs
		if !all && len(logs) > shownLogs {
			fmt.Fprintf(w, "  (%d earlier log backups not shown: --all)\n", len(logs)-shownLogs)
			logs = logs[len(logs)-shownLogs:]
		}
		for _, l := range logs {
			fmt.Fprintf(w, "  log %d %s  LSN %s..%s  finished %s  %s  on %s  %s%s\n", l.Number, l.State, dash(l.FirstLSN), dash(l.LastLSN),
				dash(l.Finish), plan.FormatBytes(l.Bytes), dash(strings.Join(l.Servers, ", ")), provenText(l.Proven), foreignText(l.Foreign))
			if l.Failure != "" {
				fmt.Fprintf(w, "    failed: %s\n", p(l.Failure))
			}
		}
		for _, g := range c.Gaps {
			fmt.Fprintf(w, "  GAP %s\n", p(g))
		}
		if b := c.Break; b != nil {
			fmt.Fprintf(w, "  BROKEN (%s) at %s: %s\n", p(b.Reason), b.At, p(b.Detail))
		}
		if c.Error != "" {
			fmt.Fprintf(w, "  not assembled: %s\n", p(c.Error))
		}
	}
	if wf := v.Workflow; wf != nil {
		if wf.Error != "" {
			fmt.Fprintf(w, "workflow %s: %s\n", p(wf.ID), p(wf.Error))
			return
		}
		fmt.Fprintf(w, "workflow %s: %s, chain %d, last log %d, lag %s, copied through %d to %s\n", p(wf.ID), wf.State, wf.Chain, wf.LastLog,
			(time.Duration(wf.LagSeconds * float64(time.Second))).Round(time.Second), wf.CopiedThrough, dash(wf.CopyTo))
		for _, msg := range []string{wf.LastError, wf.CopyError} {
			if msg != "" {
				fmt.Fprintf(w, "  error: %s\n", p(msg))
			}
		}
	}
}

func verifiedText(v bool) string {
	if v {
		return " (verified)"
	}
	return " (not verified)"
}

func provenText(pr *chainProofJSON) string {
	if pr == nil {
		return "not proven"
	}
	return fmt.Sprintf("proven %s %s", tsql.Printable(pr.Mode), pr.At)
}

func foreignText(f *chainForeignJSON) string {
	if f == nil {
		return ""
	}
	how := "not adopted"
	if f.Adopted {
		how = "adopted"
	}
	return fmt.Sprintf("  foreign (%s, %s, %s)", tsql.Printable(f.Tool), tsql.Printable(f.Path), how)
}
