package config

import (
	"fmt"
	"net/url"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// The backup_servers entries: names, limits, the SMB transport, the paths
// SQL Server writes to, the platforms they suit, the location the worker
// opens.

var uncRE = regexp.MustCompile(`^\\\\[^\\/]+\\[^\\/]+(\\[^\\/]+)*\\?$`)

// validSQLPath accepts \\host\share[\dir], C:\dir and /dir (SQL Server on Linux).
func validSQLPath(p string) bool {
	if uncRE.MatchString(p) {
		return true
	}
	if len(p) >= 3 && p[1] == ':' && p[2] == '\\' && ((p[0] >= 'A' && p[0] <= 'Z') || (p[0] >= 'a' && p[0] <= 'z')) {
		return true
	}
	return strings.HasPrefix(p, "/") && !strings.HasPrefix(p, "//")
}

func (d *decoder) checkServer(b *BackupServer, path string, all map[string]*BackupServer, instances map[string]*SQLInstance) {
	owner := labelled(path, b.Name)
	if d.checkName(b.Name, path, owner, "backup_servers", d.seen("backup_servers")) {
		all[b.Name] = b
	}
	switch strings.ToLower(b.Kind) {
	case "", KindShare:
		b.Kind = KindShare
		if b.S3 != nil {
			d.errf(d.line(join(path, "s3")), join(path, "s3"), "%s: s3: is only used with kind: s3; remove it or set kind: s3", owner)
		}
	case KindS3:
		b.Kind = KindS3
		d.checkObjectStore(b, path, owner)
		d.checkServerLimits(b, path, owner)
		return
	default:
		kp := join(path, "kind")
		d.errf(d.line(kp), kp, "%s: kind %q: use share (the default: SQL Server writes to unc_paths, the worker reaches location) or s3 (an object store with Object Lock for immutable copies)", owner, b.Kind)
		return
	}
	if len(b.UNCPaths) == 0 {
		d.errf(d.line(join(path, "unc_paths")), join(path, "unc_paths"), `missing required key "unc_paths" in %s (the paths SQL Server writes to, one per NIC, e.g. \\192.168.2.2\backup)`, owner)
	}
	seenPath := map[string]bool{}
	for i, p := range b.UNCPaths {
		pp := fmt.Sprintf("%s.unc_paths[%d]", path, i)
		switch {
		case !validSQLPath(p):
			d.errf(d.line(pp), pp, `%s: unc_paths[%d] "%s" is not a path SQL Server can write to: use \\host\share (one per NIC), D:\dir or /dir; the worker's own access goes in location`, owner, i, p)
		case seenPath[strings.ToLower(p)]:
			d.errf(d.line(pp), pp, "%s: unc_paths[%d] \"%s\" is listed twice", owner, i, p)
		}
		seenPath[strings.ToLower(p)] = true
	}
	d.checkSQLPaths(b, path, owner, instances)
	if d.required(b.Location, path, "location", owner, "how the worker reaches the files: smb://host/share/dir, file:///path or a local path") {
		d.parseLocation(b, join(path, "location"), owner)
	}
	if b.Loc.Scheme == "smb" {
		if b.SMB == nil {
			d.errf(d.line(join(path, "location")), join(path, "smb"), "missing required key \"smb\" in %s: an smb:// location needs smb: {user, password_env or password_file}", owner)
		} else {
			sp := join(path, "smb")
			d.required(b.SMB.User, sp, "user", owner+".smb", "the SMB user")
			d.checkSecret(&b.SMB.Password, sp, owner+".smb")
			d.checkSMBTransport(b, sp, owner+".smb")
		}
	} else if b.SMB != nil && b.Loc.Scheme != "" {
		d.errf(d.line(join(path, "smb")), join(path, "smb"), "%s: smb: is only used with an smb:// location; remove it or change location", owner)
	}
	if b.VerifyInstance != "" {
		if _, ok := instances[b.VerifyInstance]; !ok {
			d.errf(d.line(join(path, "verify_instance")), join(path, "verify_instance"), "%s: verify_instance %q is not defined in sql_instances (defined: %s)", owner, b.VerifyInstance, keys(instances))
		}
		d.required(b.RestoreDataDir, path, "restore_data_dir", owner, "where the verify instance restores data files, in its own path syntax")
		d.required(b.RestoreLogDir, path, "restore_log_dir", owner, "where the verify instance restores log files")
		d.checkRestoreDirs(b, path, owner)
	} else if b.RestoreDataDir != "" || b.RestoreLogDir != "" {
		d.errf(d.line(join(path, "restore_data_dir")), join(path, "verify_instance"), "%s: restore_data_dir/restore_log_dir are set but verify_instance is not: name the SQL instance that restores there", owner)
	}
	d.checkServerLimits(b, path, owner)
}

// checkServerLimits checks what every kind of server has: max_concurrent
// and task_queue.
func (d *decoder) checkServerLimits(b *BackupServer, path, owner string) {
	b.MaxConcurrent = d.positive(b.MaxConcurrent, join(path, "max_concurrent"), owner, DefaultServerConcurrency)
	if strings.ContainsAny(b.TaskQueue, " \t\n") {
		d.errf(d.line(join(path, "task_queue")), join(path, "task_queue"), "%s: task_queue %q must not contain spaces", owner, b.TaskQueue)
	}
}

// checkSMBTransport defaults require_signing to true, as Windows 11 24H2
// and Windows Server 2025 do ("Overview of Server Message Block signing",
// https://learn.microsoft.com/windows-server/storage/file-server/smb-signing-overview):
// signed, the session's messages (the copies, the manifests, the
// deletions) cannot be altered in flight, nor the login relayed. It warns
// when that is turned off towards another host, and refuses encrypt: true,
// which the client cannot enforce.
func (d *decoder) checkSMBTransport(b *BackupServer, path, owner string) {
	rp, ep := join(path, "require_signing"), join(path, "encrypt")
	if !d.given(rp) {
		b.SMB.RequireSigning = true
	} else if !b.SMB.RequireSigning && !LoopbackHost(b.Loc.Host) {
		d.warnf(d.line(rp), rp, "%s: require_signing: false lets the worker use unsigned SMB sessions with %s when the server allows them: "+
			"whoever can intercept the traffic can change the files it copies and the manifests it reads and writes, or relay its login: "+
			"leave require_signing out (true)", owner, b.Loc.Host)
	}
	// SMB 3 encryption is the server's (or the share's) setting: the
	// client learns it when the session is set up and then encrypts every
	// message, which the worker's SMB client does; no client setting asks
	// for it ([MS-SMB2] 3.3.5.2.9, Session.EncryptData).
	if b.SMB.Encrypt {
		d.errf(d.line(ep), ep, "%s: encrypt: true cannot be enforced by the worker: SMB 3 encryption is the server's setting, and the worker "+
			"encrypts whenever the server or the share asks for it: turn it on there (Windows: Set-SmbShare -Name <share> -EncryptData $true; "+
			"Samba: smb encrypt = required) and remove encrypt from this file", owner)
	}
}

// checkSQLPaths checks a server's per-instance paths: each names a
// configured instance and lists paths SQL Server can use.
func (d *decoder) checkSQLPaths(b *BackupServer, path, owner string, instances map[string]*SQLInstance) {
	names := make([]string, 0, len(b.SQLPaths))
	for name := range b.SQLPaths {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		kp := join(join(path, "sql_paths"), name)
		if _, ok := instances[name]; !ok {
			d.errf(d.line(kp), kp, "%s: sql_paths names instance %q, which is not defined in sql_instances (defined: %s)", owner, name, keys(instances))
			continue
		}
		paths := b.SQLPaths[name]
		if len(paths) == 0 {
			d.errf(d.line(kp), kp, "%s: sql_paths.%s lists no path: give the paths %s reaches this server's files by, or remove it to use unc_paths", owner, name, name)
			continue
		}
		seen := map[string]bool{}
		for i, p := range paths {
			pp := fmt.Sprintf("%s[%d]", kp, i)
			switch {
			case !validSQLPath(p):
				d.errf(d.line(pp), pp, `%s: sql_paths.%s[%d] "%s" is not a path SQL Server can write to: use \\host\share, D:\dir or /dir (where the share is mounted on %s's host)`, owner, name, i, p, name)
			case seen[strings.ToLower(p)]:
				d.errf(d.line(pp), pp, "%s: sql_paths.%s[%d] \"%s\" is listed twice", owner, name, i, p)
			}
			seen[strings.ToLower(p)] = true
		}
	}
}

// checkPlatforms refuses, for every instance declared platform: linux, UNC
// paths to a backup server it uses (as a source writing to its rotation,
// or as the server's verification instance) and Windows restore
// directories: SQL Server on Linux reaches a share where it is mounted on
// its host ("Back up and restore SQL Server databases on Linux").
func (d *decoder) checkPlatforms(c *Config) {
	linux := map[string]bool{}
	for _, in := range c.SQLInstances {
		if in.Platform == PlatformLinux {
			linux[in.Name] = true
		}
	}
	if len(linux) == 0 {
		return
	}
	index := map[string]int{}
	for i, b := range c.BackupServers {
		index[b.Name] = i
	}
	check := func(server, inst string) {
		i, ok := index[server]
		if !ok || !linux[inst] {
			return
		}
		b := &c.BackupServers[i]
		path := fmt.Sprintf("backup_servers[%d]", i)
		owner := labelled(path, b.Name)
		var unc []string
		for _, p := range b.PathsFor(inst) {
			if IsUNC(p) {
				unc = append(unc, p)
			}
		}
		if len(unc) > 0 {
			kp := join(path, b.PathsKey(inst))
			d.errf(d.line(kp), kp+"#"+inst, "%s: %s is platform: linux, and SQL Server on Linux cannot open UNC paths (%s): give it the directory where the share is mounted on its host, sql_paths: {%s: [/mnt/%s]}",
				owner, inst, unc[0], inst, b.Name)
		}
		if inst != b.VerifyInstance {
			return
		}
		for _, k := range []struct{ key, dir, example string }{
			{"restore_data_dir", b.RestoreDataDir, "/var/opt/mssql/data"}, {"restore_log_dir", b.RestoreLogDir, "/var/opt/mssql/log"}} {
			if IsWindowsPath(k.dir) {
				kp := join(path, k.key)
				d.errf(d.line(kp), kp+"#linux", "%s: %s \"%s\" is a Windows path, but verify_instance %s is platform: linux: use a directory of its host, e.g. %s",
					owner, k.key, k.dir, inst, k.example)
			}
		}
	}
	for _, b := range c.BackupServers {
		if b.VerifyInstance != "" {
			check(b.Name, b.VerifyInstance)
		}
	}
	for _, db := range c.Databases {
		for _, s := range db.BackupServers {
			for _, src := range c.Sources(db.Instance) {
				check(s, src)
			}
		}
	}
	for _, g := range c.AvailabilityGroups {
		for _, s := range g.BackupServers {
			for _, r := range g.Replicas {
				check(s, r)
			}
		}
	}
	for _, in := range c.SQLInstances {
		for _, s := range in.BackupServers {
			check(s, in.Name)
		}
	}
}

func (d *decoder) parseLocation(b *BackupServer, path, owner string) {
	raw := b.Location
	if !strings.Contains(raw, "://") {
		b.Loc = Location{Scheme: "file", Path: filepath.Clean(d.relPath(raw))}
		return
	}
	u, err := url.Parse(raw)
	if err != nil {
		d.errf(d.line(path), path, "%s: location %q is not a URL: %v", owner, raw, err)
		return
	}
	if u.User != nil {
		if _, hasPw := u.User.Password(); hasPw {
			d.errf(d.line(path), path, "%s: location: inline password is not allowed: remove it from the URL and use smb: {user, password_env or password_file}", owner)
		} else {
			d.errf(d.line(path), path, "%s: location: put the user in smb: {user: %s}, not in the URL", owner, u.User.Username())
		}
		return
	}
	switch u.Scheme {
	case "file":
		if u.Host != "" && u.Host != "localhost" {
			d.errf(d.line(path), path, "%s: location %q: a file URL needs three slashes and an absolute path: file:///srv/backup", owner, raw)
			return
		}
		b.Loc = Location{Scheme: "file", Path: filepath.Clean(u.Path)}
	case "smb":
		port := DefaultSMBPort
		if p := u.Port(); p != "" {
			n, err := strconv.Atoi(p)
			if err != nil || n < 1 || n > 65535 {
				d.errf(d.line(path), path, "%s: location %q: port %q is not a number from 1 to 65535", owner, raw, p)
				return
			}
			port = n
		}
		parts := strings.SplitN(strings.Trim(u.Path, "/"), "/", 2)
		if u.Hostname() == "" || parts[0] == "" {
			d.errf(d.line(path), path, "%s: location %q: use smb://host[:port]/share[/dir]", owner, raw)
			return
		}
		loc := Location{Scheme: "smb", Host: u.Hostname(), Port: port, Share: parts[0]}
		if len(parts) == 2 {
			loc.Dir = strings.Trim(parts[1], "/")
		}
		b.Loc = loc
	default:
		d.errf(d.line(path), path, "%s: location %q: scheme %q is not supported: use smb://host/share/dir, file:///path or a local path", owner, raw, u.Scheme)
	}
}
