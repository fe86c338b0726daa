package config

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/backupcycle/backupcycle/internal/plan"
	"github.com/backupcycle/backupcycle/internal/tsql"
)

// The policy keys (defaults: and per database) and a database's sanity
// checks: their values and bounds, each error at its file:line.

// checkPolicy checks the policy keys selected by only; values a database
// inherits are checked once, under defaults.
func (d *decoder) checkPolicy(p *Policy, path, owner string, only func(key string) bool) {
	at := func(k string) (int, string) { return d.line(join(path, k)), join(path, k) }
	if only("max_transfer_size") && p.MaxTransferSize != 0 {
		l, kp := at("max_transfer_size")
		m := int64(p.MaxTransferSize)
		switch {
		case m%(64<<10) != 0:
			hint := ""
			if m%1000000 == 0 {
				hint = fmt.Sprintf(" (did you mean %dMiB?)", m/1000000)
			}
			d.errf(l, kp, "%s: max_transfer_size %d bytes is not a multiple of 64KiB%s: SQL Server accepts 64KiB..4MiB in 64KiB steps", owner, m, hint)
		case m > 4<<20:
			d.errf(l, kp, "%s: max_transfer_size %s is above 4MiB, SQL Server's maximum", owner, p.MaxTransferSize)
		}
	}
	if only("block_size") && p.BlockSize != 0 {
		l, kp := at("block_size")
		b := int64(p.BlockSize)
		if b < 512 || b > 65536 || b&(b-1) != 0 {
			d.errf(l, kp, "%s: block_size %d is not one of 512, 1024, 2048, 4096, 8192, 16384, 32768, 65536", owner, b)
		}
	}
	if only("buffer_count") && (p.BufferCount < 0 || p.BufferCount > MaxBufferCount) {
		l, kp := at("buffer_count")
		d.errf(l, kp, "%s: buffer_count %d is out of range: use 1..%d, or 0 / leave it out to let SQL Server choose", owner, p.BufferCount, MaxBufferCount)
	}
	if only("sequence") && p.Sequence != SequenceCatalog && p.Sequence != SequenceTable && p.Sequence != SequenceUTC {
		l, kp := at("sequence")
		d.errf(l, kp, "%s: sequence %q: use catalog (kept beside the manifests), table (DBBackup.Sequence in the database) or utc", owner, p.Sequence)
	}
	if only("memory_budget") && p.MemoryBudget <= 0 {
		l, kp := at("memory_budget")
		d.errf(l, kp, "%s: memory_budget must be positive, e.g. 2GiB", owner)
	}
	d.checkBackoff(p.SQLHostWait, path, owner, "sql_host_wait", only)
	d.checkBackoff(p.BackupServerWait, path, owner, "backup_server_wait", only)
	d.checkBackoff(Backoff{Initial: p.CopyWait.Initial, MaxInterval: p.CopyWait.MaxInterval, GiveUpAfter: p.CopyWait.MaxInterval}, path, owner, "copy_wait", only)
	d.checkTimeouts(p, path, owner, only)
	if only("retention") {
		if p.Retention.KeepVerified < 1 && (path == "defaults" || d.given(join(path, "retention.keep_verified"))) {
			l, kp := at("retention.keep_verified")
			d.errf(l, kp, "%s: retention.keep_verified must be at least 1: the newest verified set is always kept", owner)
		}
		if p.Retention.DeleteFailedAfter <= 0 && (path == "defaults" || d.given(join(path, "retention.delete_failed_after"))) {
			l, kp := at("retention.delete_failed_after")
			d.errf(l, kp, "%s: retention.delete_failed_after must be positive, e.g. 72h or 3d", owner)
		}
	}
	if only("rpo") && p.RPO <= 0 {
		l, kp := at("rpo")
		d.errf(l, kp, "%s: rpo must be positive, e.g. 26h for a nightly backup", owner)
	}
	if only("rto") && p.RTO < 0 {
		l, kp := at("rto")
		d.errf(l, kp, "%s: rto must not be negative (0 = no objective), e.g. 4h", owner)
	}
	if only("verify_name") {
		l, kp := at("verify_name")
		rest := strings.NewReplacer("{db}", "", "{instance}", "", "{seq}", "").Replace(p.VerifyName)
		switch {
		case p.VerifyName == "" || strings.TrimSpace(rest) == "" && !strings.Contains(p.VerifyName, "{db}"):
			d.errf(l, kp, "%s: verify_name %q gives no name: use e.g. \"{db}_verify\"", owner, p.VerifyName)
		case strings.ContainsAny(rest, "{}"):
			d.errf(l, kp, "%s: verify_name %q: only {db}, {instance} and {seq} are replaced", owner, p.VerifyName)
		case strings.ContainsRune(rest, 0):
			d.errf(l, kp, "%s: verify_name contains a NUL byte", owner)
		case strings.TrimSpace(rest) == "":
			// Placeholders alone name the copy like a database it is not:
			// "{db}" is the source database's own name, which the
			// verification instance may host (SQL Server also ignores
			// trailing blanks when it compares names).
			d.errf(l, kp, "%s: verify_name %q has no fixed prefix or suffix, so the copy could be named like a production database: add one, e.g. \"{db}_verify\"", owner, p.VerifyName)
		case path == "defaults" && !strings.Contains(p.VerifyName, "{db}"):
			d.errf(l, kp, "%s: verify_name %q does not contain {db}, so every database's copy would get one name: use e.g. \"{db}_verify\" (a fixed name belongs in one database's entry)", owner, p.VerifyName)
		}
	}
}

func (d *decoder) checkBackoff(b Backoff, path, owner, key string, only func(string) bool) {
	if !only(key) {
		return
	}
	kp := join(path, key)
	switch {
	case b.Initial <= 0:
		d.errf(d.line(kp+".initial"), kp, "%s: %s.initial must be positive, e.g. 15s", owner, key)
	case b.MaxInterval < b.Initial:
		d.errf(d.line(kp+".max_interval"), kp, "%s: %s.max_interval %s is shorter than initial %s", owner, key, b.MaxInterval, b.Initial)
	case b.GiveUpAfter < b.Initial:
		d.errf(d.line(kp+".give_up_after"), kp, "%s: %s.give_up_after %s is shorter than initial %s", owner, key, b.GiveUpAfter, b.Initial)
	}
}

// checkMemory is seed 004's guard: the BACKUP's buffer memory, BUFFERCOUNT x
// MAXTRANSFERSIZE (Policy.BackupMemory), must fit the memory budget, or SQL
// Server fails the backup with "insufficient system memory". With stripes
// auto the planner stays within the budget (MaxStripesInBudget); one stripe
// must fit already.
func (d *decoder) checkMemory(p *Policy, path, owner string) {
	if p.MemoryBudget <= 0 { // not set (or not parsed: reported already)
		return
	}
	stripes := int(p.Stripes)
	if p.Stripes == StripesAuto {
		stripes = 1
	}
	need := p.BackupMemory(stripes)
	if need <= int64(p.MemoryBudget) {
		return
	}
	src := func(k string) string {
		if d.given(join(path, k)) {
			return ""
		}
		if d.given(join("defaults", k)) {
			return " (from defaults)"
		}
		return " (built-in default)"
	}
	line := d.line(path) // the first of the keys this database sets, else the database
	for _, k := range []string{"buffer_count", "max_transfer_size", "stripes", "memory_budget"} {
		if l := d.line(join(path, k)); d.given(join(path, k)) && (line == d.line(path) || l < line) {
			line = l
		}
	}
	bc := fmt.Sprintf("BUFFERCOUNT %d%s", p.BufferCount, src("buffer_count"))
	if p.BufferCount <= 0 {
		bc = fmt.Sprintf("SQL Server's default BUFFERCOUNT for %d stripes (%d)", stripes, plan.DefaultBufferCount(stripes, 1))
	}
	d.errf(line, join(path, "buffer_count"),
		"%s: %s x MAXTRANSFERSIZE %s%s = %s exceeds memory_budget %s%s (seed 004: SQL Server would fail with \"insufficient system memory\"): lower buffer_count or max_transfer_size, or raise memory_budget",
		owner, bc, p.effectiveMaxTransfer(), src("max_transfer_size"), Size(need), p.MemoryBudget, src("memory_budget"))
}

func (d *decoder) checkSanity(db *Database, path, owner string) {
	names := map[string]bool{}
	for i, sc := range db.SanityChecks {
		sp := fmt.Sprintf("%s.sanity_checks[%d]", path, i)
		so := labelled(owner+".sanity_checks["+strconv.Itoa(i)+"]", sc.Name)
		if d.required(sc.Name, sp, "name", so, "a short name shown in results") {
			if names[sc.Name] {
				d.errf(d.line(join(sp, "name")), join(sp, "name"), "%s: sanity check name %q is used twice", so, sc.Name)
			}
			names[sc.Name] = true
		}
		d.required(sc.Query, sp, "query", so, "the SQL run against the restored copy")
		for j, o := range sc.GrantExecute {
			if _, _, err := tsql.ParseObjectName(o); err != nil {
				d.errf(d.line(join(sp, "grant_execute")), join(sp, "grant_execute"),
					"%s: grant_execute[%d] %q: name a function of the copy, as schema.function or function", so, j, o)
			}
		}
		var set []string
		for _, k := range []string{ExpectEquals, ExpectAtLeast, ExpectMaxAge} {
			if d.given(join(sp, k)) {
				set = append(set, k)
			}
		}
		switch len(set) {
		case 1:
			db.SanityChecks[i].Expect = set[0]
			if set[0] == ExpectMaxAge && sc.MaxAge <= 0 {
				d.errf(d.line(join(sp, "max_age")), join(sp, "max_age"), "%s: max_age must be positive, e.g. 26h", so)
			}
		case 0:
			d.errf(d.line(sp), sp, "missing expectation in %s: set one of equals, at_least or max_age", so)
		default:
			d.errf(d.line(sp), sp, "%s: set only one of equals, at_least or max_age (found %s)", so, strings.Join(set, ", "))
		}
	}
}
