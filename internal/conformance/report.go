package conformance

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/backupcycle/backupcycle/internal/mssql"
	"github.com/backupcycle/backupcycle/internal/tsql"
)

// Report is what a run found, in the order the probes ran, and what it
// removed. Its JSON keys are stable: it is what a DBA sends back.
type Report struct {
	// Version is the starter's (set by the caller).
	Version        string        `json:"version,omitempty"`
	Instance       string        `json:"instance"`
	VerifyInstance string        `json:"verify_instance"`
	Server         string        `json:"server"`
	Servers        []ServerFacts `json:"servers"`
	Scratch        Scratch       `json:"scratch"`
	Started        time.Time     `json:"started"`
	Finished       time.Time     `json:"finished"`
	Probes         []Probe       `json:"probes"`
	Holds          int           `json:"holds"`
	Fails          int           `json:"fails"`
	Inconclusive   int           `json:"inconclusive"`
	Cleanup        Cleanup       `json:"cleanup"`
	// Error is why the run stopped before its end ("" when it did not).
	Error string `json:"error,omitempty"`
}

// ServerFacts say which SQL Server a probe ran on.
type ServerFacts struct {
	Instance         string `json:"instance"`
	Login            string `json:"login"`
	ProductVersion   string `json:"product_version"`
	MajorVersion     int    `json:"major_version"`
	Edition          string `json:"edition"`
	UTCOffsetMinutes int    `json:"utc_offset_minutes"`
	// SeesOtherSessions: VIEW SERVER STATE (2022: VIEW SERVER PERFORMANCE
	// STATE), without which the statements cannot be watched.
	SeesOtherSessions bool `json:"sees_other_sessions"`
}

// Scratch is what the run created.
type Scratch struct {
	Database  string   `json:"database"`
	Copies    []string `json:"copies"`
	Files     []string `json:"files"`
	FillBytes int64    `json:"fill_bytes"`
	FillRows  int64    `json:"fill_rows"`
}

// Cleanup is what the run removed and what it could not.
type Cleanup struct {
	Removed []Removed  `json:"removed"`
	Left    []Leftover `json:"left"`
}

// Removed is a database (Where: its instance) or a file (Where: its backup
// server) the run created and removed.
type Removed struct {
	Kind  string `json:"kind"` // database, file
	Where string `json:"where"`
	Name  string `json:"name"`
}

// Leftover is something the run created and could not remove: remove it
// by hand.
type Leftover struct {
	Kind  string `json:"kind"` // database, file, statement
	Where string `json:"where"`
	Name  string `json:"name"`
	Error string `json:"error"`
}

// serverFacts reads what the report says about an instance, and whether
// its login sees other sessions' requests.
func serverFacts(ctx context.Context, db *mssql.DB, instance, user string) (ServerFacts, bool, error) {
	f := ServerFacts{Instance: instance, Login: user}
	var version, edition sql.NullString
	var major, engine sql.NullInt64
	if err := db.QueryRowContext(ctx, tsql.ProductVersion).Scan(&version); err != nil {
		return f, false, fmt.Errorf("read %s's version: %w", instance, mssql.Classify(db.Target, "read the version", err))
	}
	if err := db.QueryRowContext(ctx, tsql.HostEdition()).Scan(&major, &engine, &edition); err != nil {
		return f, false, fmt.Errorf("read %s's edition: %w", instance, mssql.Classify(db.Target, "read the edition", err))
	}
	f.ProductVersion, f.MajorVersion, f.Edition = version.String, int(major.Int64), edition.String
	local, utc, err := clock(ctx, db)
	if err != nil {
		return f, false, err
	}
	f.UTCOffsetMinutes = int(local.Sub(utc).Round(time.Minute) / time.Minute)
	see, known, err := db.CanSeeOtherSessions(ctx, tsql.CanSeeOtherSessions())
	f.SeesOtherSessions = err == nil && known && see
	return f, f.SeesOtherSessions, nil
}

// finish counts the verdicts.
func (r *Report) finish() {
	r.Finished = time.Now().UTC()
	r.Holds, r.Fails, r.Inconclusive = 0, 0, 0
	for _, p := range r.Probes {
		switch p.Verdict {
		case Holds:
			r.Holds++
		case Fails:
			r.Fails++
		default:
			r.Inconclusive++
		}
	}
	if r.Cleanup.Removed == nil {
		r.Cleanup.Removed = []Removed{}
	}
	if r.Cleanup.Left == nil {
		r.Cleanup.Left = []Leftover{}
	}
}

// Failed reports a probe that fails.
func (r *Report) Failed() bool { return r.Fails > 0 }

// WriteJSON writes the report as indented JSON.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// WriteText writes the report for a person: per probe its verdict, the
// assumption, what the server did and what a failure means.
func (r *Report) WriteText(w io.Writer) error {
	var b strings.Builder
	for _, s := range r.Servers {
		fmt.Fprintf(&b, "%s: SQL Server %s, %s, UTC%+d min, login %s", s.Instance, s.ProductVersion, s.Edition, s.UTCOffsetMinutes, s.Login)
		if !s.SeesOtherSessions {
			b.WriteString(" (sees no other session: no VIEW SERVER STATE)")
		}
		b.WriteString("\n")
	}
	for _, p := range r.Probes {
		if p.Observed == notMeasured {
			fmt.Fprintf(&b, "\n%-13s %s: not measured: %s\n", strings.ToUpper(string(p.Verdict)), p.ID, p.Why)
			continue
		}
		fmt.Fprintf(&b, "\n%-13s %s\n", strings.ToUpper(string(p.Verdict)), p.ID)
		fmt.Fprintf(&b, "  assumption:  %s\n", p.Assumption)
		fmt.Fprintf(&b, "  observed:    %s\n", p.Observed)
		if p.Why != "" {
			fmt.Fprintf(&b, "  why:         %s\n", p.Why)
		}
		fmt.Fprintf(&b, "  if it fails: %s\n", p.IfFails)
	}
	fmt.Fprintf(&b, "\n%d probes: %d hold, %d fail, %d inconclusive\n", len(r.Probes), r.Holds, r.Fails, r.Inconclusive)
	if r.Error != "" {
		fmt.Fprintf(&b, "stopped early: %s\n", r.Error)
	}
	if len(r.Cleanup.Removed) > 0 {
		var names []string
		for _, x := range r.Cleanup.Removed {
			names = append(names, fmt.Sprintf("%s %s on %s", x.Kind, x.Name, x.Where))
		}
		fmt.Fprintf(&b, "removed: %s\n", strings.Join(names, ", "))
	}
	for _, x := range r.Cleanup.Left {
		fmt.Fprintf(&b, "NOT REMOVED: %s %s on %s: %s (remove it by hand)\n", x.Kind, x.Name, x.Where, x.Error)
	}
	_, err := io.WriteString(w, b.String())
	return err
}
