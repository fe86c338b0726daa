package hostcheck

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/backupcycle/backupcycle/internal/plan"
	"github.com/backupcycle/backupcycle/internal/tsql"
)

// FileVolume is one database file and the volume it lies on
// (tsql.FileVolumes).
type FileVolume struct {
	Database, State string // sys.databases name and state_desc
	Type            int    // sys.master_files.type
	Path            string // physical_name
	Bytes           int64  // allocated size
	// Mount is the volume's mount point; "" on Linux, where SQL Server
	// does not report it.
	Mount            string
	Total, Available int64
}

// ReadVolumes lists every database file the login sees with its volume.
func ReadVolumes(ctx context.Context, q Querier) ([]FileVolume, error) {
	var out []FileVolume
	err := eachRow(ctx, q, "volumes of the database files", tsql.FileVolumes(), nil, func(rows *sql.Rows) error {
		var db, state, path, mount sql.NullString
		var typ, pages, total, avail sql.NullInt64
		if err := rows.Scan(&db, &state, &typ, &path, &pages, &mount, &total, &avail); err != nil {
			return err
		}
		out = append(out, FileVolume{Database: db.String, State: state.String, Type: int(typ.Int64), Path: path.String,
			Bytes: pages.Int64 * tsql.PageBytes, Mount: mount.String, Total: total.Int64, Available: avail.Int64})
		return nil
	})
	return out, err
}

// Volume is the volume a directory lies on, as the files there tell.
type Volume struct {
	// Name is its mount point, or on Linux the directory it was found by.
	Name             string
	Total, Available int64
	// Files are the database files on it.
	Files []FileVolume
}

// key identifies a volume: its mount point, or (Linux, no mount point) its
// size and free space as sys.dm_os_volume_stats reported them in one query.
func (v Volume) key() string {
	if strings.HasSuffix(v.Name, `\`) || strings.HasSuffix(v.Name, "/") {
		return strings.ToLower(v.Name)
	}
	return fmt.Sprintf("%d/%d", v.Total, v.Available)
}

// VolumeOf finds the volume of dir among the files' volumes: the volume of
// a file directly in dir, else (Windows) the one with the longest mount
// point dir lies under. ok is false when no file tells: SQL Server reports
// free space only for volumes holding a database file
// (sys.dm_os_volume_stats takes a database and a file).
func VolumeOf(dir string, files []FileVolume) (Volume, bool) {
	d := normDir(dir)
	var best *FileVolume
	for i := range files {
		f := &files[i]
		if normDir(parentDir(f.Path)) == d {
			best = f
			break
		}
	}
	if best == nil {
		for i := range files {
			f := &files[i]
			m := normDir(f.Mount)
			if f.Mount != "" && (d == m || strings.HasPrefix(d, m+"/")) && (best == nil || len(m) > len(normDir(best.Mount))) {
				best = f
			}
		}
	}
	if best == nil {
		return Volume{}, false
	}
	v := Volume{Name: best.Mount, Total: best.Total, Available: best.Available}
	if v.Name == "" {
		v.Name = dir
	}
	for _, f := range files {
		if f.Mount == best.Mount && f.Total == best.Total && (f.Mount != "" || f.Available == best.Available) {
			v.Files = append(v.Files, f)
		}
	}
	return v, true
}

// normDir compares Windows and POSIX directories alike: lower case, / as
// separator, no trailing separator.
func normDir(p string) string {
	return strings.TrimRight(strings.ToLower(strings.ReplaceAll(p, `\`, "/")), "/")
}

func parentDir(p string) string {
	if i := strings.LastIndexAny(p, `\/`); i >= 0 {
		return p[:i]
	}
	return ""
}

// DirNeed is what a restore directory must take: key names it
// (restore_data_dir), Bytes the allocated size of the files going there.
type DirNeed struct {
	Key, Dir string
	Bytes    int64
	What     string // "data files of sql01/Sales", for messages
}

// Space checks the free space of the volumes the directories lie on
// against what goes there, per volume (a data and a log directory on one
// volume add up). The files of replacing (the copy a RESTORE ... REPLACE
// overwrites) give their space back. Free space is what the volume
// reports, which already counts the copies restored or being restored
// there: SQL Server creates a database's files at their full size when its
// RESTORE starts. A volume no database file tells about is not judged: the
// RESTORE's own check (3257) still stops it before it writes.
func Space(inst string, dirs []DirNeed, files []FileVolume, replacing string) []Finding {
	type group struct {
		vol   Volume
		needs []DirNeed
	}
	var groups []*group
	var out []Finding
	for _, n := range dirs {
		v, ok := VolumeOf(n.Dir, files)
		if !ok {
			// Not a warning: SQL Server's RESTORE checks the space itself
			// before it writes (3257, which the cycle reports as
			// VerifyInstanceFull).
			out = append(out, Finding{Check: "free space " + n.Key,
				Detail: fmt.Sprintf("not known yet for %s (SQL Server reports free space only for volumes holding a database file); "+
					"it must hold %s (%s), and a RESTORE that does not fit is refused before it writes (3257)", n.Dir, plan.FormatBytes(n.Bytes), n.What)})
			continue
		}
		found := false
		for _, g := range groups {
			if g.vol.key() == v.key() {
				g.needs = append(g.needs, n)
				found = true
			}
		}
		if !found {
			groups = append(groups, &group{vol: v, needs: []DirNeed{n}})
		}
	}
	for _, g := range groups {
		var need, back int64
		var keys, whats []string
		for _, n := range g.needs {
			need += n.Bytes
			keys = append(keys, n.Key+" "+n.Dir)
			whats = append(whats, n.What+" "+plan.FormatBytes(n.Bytes))
		}
		held := map[string]int64{}
		for _, f := range g.vol.Files {
			if replacing != "" && strings.EqualFold(f.Database, replacing) {
				back += f.Bytes
				continue
			}
			name := f.Database
			if f.State == "RESTORING" {
				name += " (being restored)"
			}
			held[name] += f.Bytes
		}
		free := g.vol.Available + back
		c := Finding{Check: "free space " + g.needs[0].Key, Detail: fmt.Sprintf("%s on volume %s: %s free, %s needed (%s)",
			strings.Join(keys, ", "), g.vol.Name, plan.FormatBytes(free), plan.FormatBytes(need), strings.Join(whats, ", "))}
		if back > 0 {
			c.Detail += fmt.Sprintf("; the copy it replaces gives back %s", plan.FormatBytes(back))
		}
		if need > free {
			c.Problem, c.Full = true, true
			c.Detail = fmt.Sprintf("%s on volume %s of %s: %s free, %s needed (%s, the files' allocated size)",
				strings.Join(keys, ", "), g.vol.Name, inst, plan.FormatBytes(free), plan.FormatBytes(need), strings.Join(whats, ", "))
			if len(held) > 0 {
				c.Detail += "; held there: " + holders(held)
			}
			c.Fix = fmt.Sprintf("free %s on that volume (drop copies kept there with keep_verify_db, or other databases), or point %s at a volume with more space",
				plan.FormatBytes(need-free), g.needs[0].Key)
		}
		out = append(out, c)
	}
	return out
}

// holders lists the largest holders of a volume first, at most five.
func holders(held map[string]int64) string {
	names := make([]string, 0, len(held))
	for n := range held {
		names = append(names, n)
	}
	sort.Slice(names, func(i, j int) bool {
		return held[names[i]] > held[names[j]] || held[names[i]] == held[names[j]] && names[i] < names[j]
	})
	var parts []string
	for _, n := range names[:min(len(names), 5)] {
		parts = append(parts, n+" "+plan.FormatBytes(held[n]))
	}
	if len(names) > 5 {
		parts = append(parts, fmt.Sprintf("and %d more", len(names)-5))
	}
	return strings.Join(parts, ", ")
}

// Tempdb is a heuristic warning: DBCC CHECKDB sorts its facts in tempdb,
// and a tempdb (its files and the free space of their volumes) smaller
// than a twentieth of the largest database's data may stop it with 1105
// and 8921. `DBCC CHECKDB WITH ESTIMATEONLY` on a restored copy tells the
// real need ("DBCC CHECKDB (Transact-SQL)", ESTIMATEONLY).
func Tempdb(inst string, files []FileVolume, largest int64, largestName string) Finding {
	c := Finding{Check: "tempdb"}
	var size int64
	vols := map[string]int64{}
	for _, f := range files {
		if strings.EqualFold(f.Database, "tempdb") {
			size += f.Bytes
			vols[fmt.Sprintf("%s|%d", f.Mount, f.Total)] = f.Available
		}
	}
	if size == 0 {
		c.Detail = "not checked: tempdb's files are not visible (sys.dm_os_volume_stats)"
		return c
	}
	room := size
	for _, a := range vols {
		room += a
	}
	c.Detail = fmt.Sprintf("%s (files and the free space of their volumes)", plan.FormatBytes(room))
	if largest/20 > room {
		c.Warn = true
		c.Detail = fmt.Sprintf("tempdb can grow to %s, less than a twentieth of %s's %s of data: DBCC CHECKDB may stop with 8921 (tempdb full)",
			plan.FormatBytes(room), largestName, plan.FormatBytes(largest))
		c.Fix = "give tempdb on " + inst + " more room; DBCC CHECKDB ... WITH ESTIMATEONLY on a restored copy tells what it needs"
	}
	return c
}

// FirstProblem is the first finding that is a problem, if any.
func FirstProblem(fs []Finding) (Finding, bool) {
	i := slices.IndexFunc(fs, func(f Finding) bool { return f.Problem })
	if i < 0 {
		return Finding{}, false
	}
	return fs[i], true
}
