package preflight

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"

	"go.uber.org/zap"
)

// Status is the outcome of one check.
type Status string

const (
	// OK: the permission holds (or the thing works).
	OK Status = "OK"
	// Missing: the cycle would fail on it; Fix says what to run.
	Missing Status = "MISSING"
	// Warn: the cycle works, less well (an optional permission, a size
	// that could not be read, free space only enough when compression
	// reaches its planned factor).
	Warn Status = "WARN"
)

// Kinds of the thing a check is about.
const (
	KindInstance = "instance" // a SQL instance, server-level permissions
	KindDatabase = "database" // a database on its source instance
	KindServer   = "server"   // a backup server's storage
	KindConfig   = "config"   // a setting of the configuration file
)

// Check is one permission or capability the cycle needs, and whether it
// holds.
type Check struct {
	Kind     string `json:"kind"`
	Instance string `json:"instance,omitempty"`
	Database string `json:"database,omitempty"`
	Server   string `json:"server,omitempty"`
	// Name is what is checked: "BACKUP DATABASE", "VIEW SERVER STATE",
	// "write", "free space", ...
	Name   string `json:"check"`
	Status Status `json:"status"`
	// For says which step needs it, e.g. "source: RESTORE HEADERONLY
	// recognises a finished BACKUP".
	For string `json:"for,omitempty"`
	// Detail is what was found.
	Detail string `json:"detail,omitempty"`
	// Fix is the statement (or action) that makes a MISSING or WARN check
	// pass: GRANT ..., ALTER ROLE ..., a config change.
	Fix string `json:"fix,omitempty"`
}

// Report is the outcome of a preflight run.
type Report struct {
	Config   string  `json:"config,omitempty"`
	OK       bool    `json:"ok"` // nothing is missing (warnings allowed)
	Missing  int     `json:"missing"`
	Warnings int     `json:"warnings"`
	Checks   []Check `json:"checks"`
	// headers title each section (kind + name) in the text output.
	headers map[string]string
}

func sectionKey(c Check) string {
	switch c.Kind {
	case KindDatabase:
		return KindDatabase + "\x00" + c.Instance + "\x00" + c.Database
	case KindServer:
		return KindServer + "\x00" + c.Server
	case KindConfig:
		return KindConfig
	}
	return KindInstance + "\x00" + c.Instance
}

// add appends checks; a server-level check already present for the same
// instance (an instance that is both source and verification) is merged
// into the first, keeping the worse status.
func (r *Report) add(cs ...Check) {
	for _, c := range cs {
		merged := false
		for i := range r.Checks {
			p := &r.Checks[i]
			if p.Kind == c.Kind && p.Instance == c.Instance && p.Database == c.Database && p.Server == c.Server && p.Name == c.Name {
				if c.For != "" && !strings.Contains(p.For, c.For) {
					p.For += "; " + c.For
				}
				if rank(c.Status) > rank(p.Status) {
					p.Status, p.Detail, p.Fix = c.Status, c.Detail, c.Fix
				}
				merged = true
				break
			}
		}
		if !merged {
			r.Checks = append(r.Checks, c)
		}
	}
}

// addToSections adds checks each after the last check of its section (its
// instance, database or server), so that the text report shows a section
// once; a check of a section not yet in the report goes last.
func (r *Report) addToSections(cs ...Check) {
	for _, c := range cs {
		at := -1
		for i := range r.Checks {
			if sectionKey(r.Checks[i]) == sectionKey(c) {
				at = i
			}
		}
		if at < 0 {
			r.add(c)
			continue
		}
		r.Checks = slices.Insert(r.Checks, at+1, c)
	}
}

func rank(s Status) int {
	switch s {
	case Missing:
		return 2
	case Warn:
		return 1
	}
	return 0
}

// finish keeps each section's rows together, in the order the sections
// first appear (a verification instance's host checks come after every
// source was read), and counts the outcome.
func (r *Report) finish() {
	order := map[string]int{}
	for _, c := range r.Checks {
		if _, ok := order[sectionKey(c)]; !ok {
			order[sectionKey(c)] = len(order)
		}
	}
	sort.SliceStable(r.Checks, func(i, j int) bool { return order[sectionKey(r.Checks[i])] < order[sectionKey(r.Checks[j])] })
	r.Missing, r.Warnings = 0, 0
	for _, c := range r.Checks {
		switch c.Status {
		case Missing:
			r.Missing++
		case Warn:
			r.Warnings++
		}
	}
	r.OK = r.Missing == 0
}

// MissingChecks are the checks whose status is MISSING.
func (r *Report) MissingChecks() []Check {
	var out []Check
	for _, c := range r.Checks {
		if c.Status == Missing {
			out = append(out, c)
		}
	}
	return out
}

// Err is nil when nothing is missing, else one line naming how many
// checks failed (the report says which and how to fix them).
func (r *Report) Err() error {
	if r.OK {
		return nil
	}
	return fmt.Errorf("preflight: %d missing (%d warnings): apply the fix the report gives under each (a GRANT, a configuration change, a setting of the instance), then run preflight again", r.Missing, r.Warnings)
}

// WriteText prints the report as one table per instance, database and
// backup server: status, check, what was found, and the fix below it.
func (r *Report) WriteText(w io.Writer) error {
	var b strings.Builder
	if r.Config != "" {
		fmt.Fprintf(&b, "preflight of %s\n", r.Config)
	}
	last := ""
	for _, c := range r.Checks {
		if k := sectionKey(c); k != last {
			last = k
			h := r.headers[k]
			if h == "" {
				h = defaultHeader(c)
			}
			fmt.Fprintf(&b, "\n%s\n", h)
		}
		detail := c.Detail
		if c.For != "" && c.Status != OK {
			// Why it is needed, where it matters: next to what is wrong.
			detail = strings.TrimSpace(detail + " [" + c.For + "]")
		}
		fmt.Fprintf(&b, "  %-8s %-31s %s\n", c.Status, c.Name, detail)
		if c.Fix != "" && c.Status != OK {
			for i, line := range strings.Split(c.Fix, "\n") {
				label := "fix:"
				if i > 0 {
					label = ""
				}
				fmt.Fprintf(&b, "  %-8s %-31s %s\n", "", label, line)
			}
		}
	}
	fmt.Fprintf(&b, "\n%s\n", r.Summary())
	_, err := io.WriteString(w, b.String())
	return err
}

// Summary is the last line of the text report.
func (r *Report) Summary() string {
	verdict := "nothing missing"
	if !r.OK {
		verdict = fmt.Sprintf("%d MISSING", r.Missing)
	}
	return fmt.Sprintf("preflight: %d checks, %s, %d warnings", len(r.Checks), verdict, r.Warnings)
}

func defaultHeader(c Check) string {
	switch c.Kind {
	case KindDatabase:
		return "database " + c.Instance + "/" + c.Database
	case KindServer:
		return "backup server " + c.Server
	case KindConfig:
		return "configuration"
	}
	return "SQL instance " + c.Instance
}

// WriteJSON prints the report for machines.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// Log writes every check that is not OK as a warning with the stable keys
// instance, db and server, and one summary line: the worker's start-up
// report.
func (r *Report) Log(log *zap.Logger) {
	for _, c := range r.Checks {
		if c.Status == OK {
			continue
		}
		fields := []zap.Field{zap.String("check", c.Name), zap.String("status", string(c.Status))}
		if c.Instance != "" {
			fields = append(fields, zap.String("instance", c.Instance))
		}
		if c.Database != "" {
			fields = append(fields, zap.String("db", c.Database))
		}
		if c.Server != "" {
			fields = append(fields, zap.String("server", c.Server))
		}
		if c.Detail != "" {
			fields = append(fields, zap.String("detail", c.Detail))
		}
		if c.Fix != "" {
			fields = append(fields, zap.String("fix", c.Fix))
		}
		msg := "preflight: permission missing"
		if c.Status == Warn {
			msg = "preflight: warning"
		}
		log.Warn(msg, fields...)
	}
	log.Info(r.Summary(), zap.Int("missing", r.Missing), zap.Int("warnings", r.Warnings))
}
