package config

import (
	"fmt"
	"strings"
	"unicode/utf16"

	"github.com/backupcycle/backupcycle/internal/tsql"
)

// Every name a cycle derives from the configuration is checked here, at its
// widest, so that a name over a limit is refused when the configuration is
// loaded instead of failing a cycle after its BACKUP and copy (leaving a
// failed set and a used sequence number behind). The limits and their
// sources are in internal/tsql (MaxIdentLen, MaxFileNameLen, MaxPath).
//
// The workflow id (backup-<instance>-<db>, workflows.CycleWorkflowID) is
// not computed here (package workflows imports this one); it is bounded by
// what is checked here: an instance name of at most 63 ASCII characters and
// a database name of at most 128 characters, each unsafe run replaced by one
// "_", make at most 208 bytes, far below Temporal's default limit of 1000
// (limit.maxIDLength). `starter plan` checks the real id.

// utf16Len counts as SQL Server and Windows count: UTF-16 code units.
func utf16Len(s string) int { return len(utf16.Encode([]rune(s))) }

// nameProblem is one derived name over its limit: key is where it comes
// from, relative to the database ("verify_name", "name", or
// "stripe_path[<server>]"), msg the message after the database's label.
type nameProblem struct{ key, msg string }

// nameProblems checks the names derived for one database: the verification
// database name and the file names and paths of its sets on every backup
// server it writes to (rotation) or restores from (copy targets).
func nameProblems(db *Database, servers func(string) *BackupServer, targets, sources []string, verifyName bool) []nameProblem {
	if db.Name == "" || tsql.CheckIdent(db.Name) != nil || db.Instance == "" {
		return nil // the name itself is reported already
	}
	var out []nameProblem
	if verifyName {
		if msg := verifyNameProblem(db); msg != "" {
			out = append(out, nameProblem{"verify_name", msg})
		}
	}
	// File names do not depend on the server; paths do.
	stripes := int(db.Stripes)
	for _, e := range tsql.CheckSetNames(db.Instance, db.Name, stripes, nil) {
		out = append(out, nameProblem{"name#" + e.What, fmt.Sprintf(
			"%v (sequence at its widest, %d digits), over the limit of a file name on Windows and Linux shares: use a shorter instance name under sql_instances",
			e, len(fmt.Sprint(tsql.MaxSequence)))})
	}
	// The source (each replica of a group) writes to its rotation by its
	// paths, the verification instance of a copy target reads by its own.
	type use struct{ server, instance string }
	var uses []use
	for _, name := range db.BackupServers {
		for _, src := range sources {
			uses = append(uses, use{name, src})
		}
	}
	for _, name := range targets {
		if s := servers(name); s != nil && s.VerifyInstance != "" {
			uses = append(uses, use{name, s.VerifyInstance})
		}
	}
	seen := map[string]bool{}
	for _, u := range uses {
		s := servers(u.server)
		if s == nil {
			continue
		}
		key := s.PathsKey(u.instance)
		if seen[u.server+"\x00"+key] {
			continue
		}
		seen[u.server+"\x00"+key] = true
		for _, e := range tsql.CheckSetNames(db.Instance, db.Name, stripes, s.PathsFor(u.instance)) {
			if e.What != "stripe path" {
				continue // reported above
			}
			out = append(out, nameProblem{"stripe_path[" + u.server + "]", fmt.Sprintf(
				"%s %q on backup server %s is %d characters (sequence at its widest); SQL Server opens backup files by paths of at most %d characters (MAX_PATH): shorten that %s entry of %s by %d characters",
				e.What, e.Name, u.server, e.Len, e.Limit, key, u.server, e.Len-e.Limit)})
		}
	}
	return out
}

// checkNames reports nameProblems at their lines.
func (d *decoder) checkNames(db *Database, path, owner string, servers map[string]*BackupServer, targets, sources []string) {
	kp := join(path, "verify_name")
	// A wrong pattern is reported as such, not also as too long.
	verifyName := !d.reported[kp] && (d.given(kp) || !d.reported["defaults.verify_name"])
	for _, p := range nameProblems(db, func(n string) *BackupServer { return servers[n] }, targets, sources, verifyName) {
		line := d.line(path)
		switch {
		case p.key == "verify_name":
			line = d.line(kp)
		case strings.HasPrefix(p.key, "name"):
			line = d.line(join(path, "name"))
		}
		d.errf(line, join(path, p.key), "%s: %s", owner, p.msg)
	}
}

// CheckNames checks every name a cycle of db derives from c, at its widest,
// as loading the configuration does: for a configuration built or changed
// in code, so that a name over its limit stops the cycle before any SQL
// runs. The error lists each name, its length, its limit and the fix.
func (c *Config) CheckNames(db *Database) error {
	var targets []string
	if db.CopyTo != "" {
		targets = []string{db.CopyTo}
	} else if len(db.BackupServers) > 1 {
		targets = db.BackupServers
	}
	servers := func(n string) *BackupServer { s, _ := c.BackupServer(n); return s }
	var msgs []string
	sources := c.Sources(db.Instance)
	if db.Replica != "" {
		sources = []string{db.Replica}
	}
	for _, p := range nameProblems(db, servers, targets, sources, true) {
		msgs = append(msgs, p.msg)
	}
	seen := map[string]bool{}
	for _, t := range targets {
		if s := servers(t); s != nil && !seen[t] {
			seen[t] = true
			for _, k := range restoreDirProblems(s) {
				msgs = append(msgs, "backup server "+s.Name+": "+k.msg)
			}
		}
	}
	if len(msgs) == 0 {
		return nil
	}
	return fmt.Errorf("database %s: %w: %s", db.ID(), tsql.ErrNameTooLong, strings.Join(msgs, "; "))
}

// verifyNameProblem checks the verification database name with {seq} at
// its widest (tsql.MaxSequence); "" when it is fine.
func verifyNameProblem(db *Database) string {
	vn := db.VerifyDatabaseName(tsql.MaxSequence)
	fix := ""
	if s := suggestVerifyName(db); s != "" {
		fix = fmt.Sprintf(", e.g. verify_name: %q", s)
	}
	e := tsql.CheckIdentLen("verification database name", vn)
	if e == nil {
		return ""
	}
	widest := ""
	if strings.Contains(db.VerifyName, "{seq}") {
		widest = fmt.Sprintf(", {seq} at its widest, %d digits", len(fmt.Sprint(tsql.MaxSequence)))
	}
	return fmt.Sprintf("verification database name %q (verify_name %q%s) is %d characters; SQL Server names are at most %d: set verify_name to a shorter pattern%s",
		vn, db.VerifyName, widest, e.Len, e.Limit, fix)
}

// suggestVerifyName is db's verify_name with {db} replaced by a shortened
// database name (tsql.ShortName: its start, "~" and a hash) that fits at its
// widest, or "" when even that does not fit; characters outside the BMP
// become "_" (tsql.LoginSafeName).
func suggestVerifyName(db *Database) string {
	k := strings.Count(db.VerifyName, "{db}")
	if k == 0 {
		return ""
	}
	rest := strings.NewReplacer("{db}", "", "{instance}", db.Instance, "{seq}", fmt.Sprint(tsql.MaxSequence)).Replace(db.VerifyName)
	room := (tsql.MaxIdentLen - utf16Len(rest)) / k
	if room < 16 || !tsql.LoginSafe(rest) {
		return ""
	}
	name := tsql.LoginSafeName(db.Name, room)
	return strings.ReplaceAll(db.VerifyName, "{db}", name)
}

// restoreDirProblems checks that the restore directories of a verification
// server leave room for the names of restored files (tsql.Moves).
func restoreDirProblems(b *BackupServer) []nameProblem {
	var out []nameProblem
	for _, k := range []struct{ key, dir string }{{"restore_data_dir", b.RestoreDataDir}, {"restore_log_dir", b.RestoreLogDir}} {
		if k.dir == "" {
			continue
		}
		if e := tsql.CheckRestoreDir(k.key, k.dir); e != nil {
			out = append(out, nameProblem{k.key, fmt.Sprintf(
				"%s %q leaves %d characters for the names of restored files within SQL Server's %d-character path limit (MAX_PATH), fewer than the %d they need: use a directory shorter by %d characters",
				k.key, k.dir, max(tsql.MaxPhysicalPath-e.Len, 0), tsql.MaxPhysicalPath, tsql.MinMoveRoom, e.Len-e.Limit)})
		}
	}
	return out
}

// checkRestoreDirs reports restoreDirProblems at their keys.
func (d *decoder) checkRestoreDirs(b *BackupServer, path, owner string) {
	for _, p := range restoreDirProblems(b) {
		kp := join(path, p.key)
		d.errf(d.line(kp), kp, "%s: %s", owner, p.msg)
	}
}
