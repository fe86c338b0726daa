package config

import (
	"fmt"
	"net"
	"net/url"
	"path"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/backupcycle/backupcycle/internal/plan"
)

// SQLInstance returns the instance with that name.
func (c *Config) SQLInstance(name string) (*SQLInstance, bool) {
	for i := range c.SQLInstances {
		if c.SQLInstances[i].Name == name {
			return &c.SQLInstances[i], true
		}
	}
	return nil, false
}

// BackupServer returns the backup server with that name.
func (c *Config) BackupServer(name string) (*BackupServer, bool) {
	for i := range c.BackupServers {
		if c.BackupServers[i].Name == name {
			return &c.BackupServers[i], true
		}
	}
	return nil, false
}

// Database returns the configured database with that name on that instance;
// instance may be "" when the name is unique in the configuration. The error
// names what is configured.
func (c *Config) Database(instance, name string) (*Database, error) {
	var found []*Database
	for i := range c.Databases {
		db := &c.Databases[i]
		if db.Name == name && (instance == "" || db.Instance == instance) {
			found = append(found, db)
		}
	}
	switch len(found) {
	case 1:
		return found[0], nil
	case 0:
		var have []string
		for _, db := range c.Databases {
			have = append(have, db.Instance+"/"+db.Name)
		}
		sort.Strings(have)
		return nil, fmt.Errorf("database %q is not configured in %s (configured: %s): add it under databases:", name, c.File, strings.Join(have, ", "))
	}
	return nil, fmt.Errorf("database %q is configured on several instances in %s: name the instance too", name, c.File)
}

// PathsFor are the paths SQL Server instance reaches the server's files by:
// its sql_paths, else unc_paths.
func (b *BackupServer) PathsFor(instance string) []string {
	if p, ok := b.SQLPaths[instance]; ok {
		return p
	}
	return b.UNCPaths
}

// PathsKey names where PathsFor(instance) comes from, for messages:
// "sql_paths.<instance>" or "unc_paths".
func (b *BackupServer) PathsKey(instance string) string {
	if _, ok := b.SQLPaths[instance]; ok {
		return "sql_paths." + instance
	}
	return "unc_paths"
}

// IsUNC reports a \\host\share path, which SQL Server on Linux cannot
// open.
func IsUNC(p string) bool { return strings.HasPrefix(p, `\\`) || strings.HasPrefix(p, "//") }

// IsWindowsPath reports a drive-letter or UNC path.
func IsWindowsPath(p string) bool {
	return IsUNC(p) || len(p) >= 2 && p[1] == ':' && (p[0] >= 'A' && p[0] <= 'Z' || p[0] >= 'a' && p[0] <= 'z')
}

// ID is "instance/name", unique in a configuration (a stable key for
// workflow ids and schedules).
func (db *Database) ID() string { return db.Instance + "/" + db.Name }

// CopyTarget is the backup server that receives the remote copy of a set
// written to primary: copy_to, or else the next server in the rotation.
func (db *Database) CopyTarget(primary string) string {
	if db.CopyTo != "" {
		return db.CopyTo
	}
	for i, s := range db.BackupServers {
		if s == primary {
			return db.BackupServers[(i+1)%len(db.BackupServers)]
		}
	}
	return ""
}

// ServersAndTargets are the rotation and every copy target of db, once
// each: every server that may hold a set of it.
func (db *Database) ServersAndTargets() []string {
	out := slices.Clone(db.BackupServers)
	for _, s := range db.BackupServers {
		if t := db.CopyTarget(s); t != "" && !slices.Contains(out, t) {
			out = append(out, t)
		}
	}
	return out
}

// VerifyDatabaseName is the name of the restored copy for a sequence number:
// verify_name with {db}, {instance} (the source instance's name) and {seq}
// (8 digits, zero padded) replaced.
func (db *Database) VerifyDatabaseName(seq int64) string {
	return strings.NewReplacer("{db}", db.Name, "{instance}", db.Instance, "{seq}", fmt.Sprintf("%08d", seq)).Replace(db.VerifyName)
}

// VerifyPattern is the name of every restored copy of databases with this
// verify_name, as a LIKE pattern ({db}, {instance} and {seq} become %):
// what the verification instance's own maintenance jobs should exclude.
func (db *Database) VerifyPattern() string {
	return strings.NewReplacer("{db}", "%", "{instance}", "%", "{seq}", "%").Replace(db.VerifyName)
}

// effectiveMaxTransfer is MAXTRANSFERSIZE as SQL Server will use it.
func (p *Policy) effectiveMaxTransfer() Size {
	if p.MaxTransferSize == 0 {
		return SQLServerDefaultMaxTransfer
	}
	return p.MaxTransferSize
}

// BackupMemory is the buffer memory one BACKUP with this policy and stripe
// count takes: BUFFERCOUNT x MAXTRANSFERSIZE (seed 004; BUFFERCOUNT counts
// the buffers of all backup files together), with SQL Server's defaults for
// what is not set — its default BUFFERCOUNT grows with the stripe count. It is
// plan.BackupMemory, the same measure the cycle's plan step checks.
func (p *Policy) BackupMemory(stripes int) int64 {
	return plan.BackupMemory(p.tuning(stripes), 1)
}

func (p *Policy) tuning(stripes int) plan.Tuning {
	return plan.Tuning{Stripes: stripes, BufferCount: p.BufferCount,
		MaxTransferSize: int(p.MaxTransferSize), BlockSize: int(p.BlockSize)}
}

// MaxStripesInBudget is the most stripes (at most MaxStripes) whose buffer
// memory fits the memory budget; the planner caps `stripes: auto` with it.
// 0 means not even one.
func (p *Policy) MaxStripesInBudget() int {
	n := 0
	for s := 1; s <= MaxStripes && p.BackupMemory(s) <= int64(p.MemoryBudget); s++ {
		n = s
	}
	return n
}

// ConnString is the go-mssqldb connection URL for this instance; password
// comes from ResolveSecret(s.Password) inside the activity. The result holds
// the password: never log it or pass it to a workflow.
func (s *SQLInstance) ConnString(password, database string) string {
	q := url.Values{}
	if database != "" {
		q.Set("database", database)
	}
	q.Set("encrypt", s.Encrypt)
	if s.TrustServerCertificate {
		q.Set("TrustServerCertificate", "true")
	}
	if s.HostNameInCertificate != "" {
		q.Set("hostNameInCertificate", s.HostNameInCertificate)
	}
	if s.ConnectTimeout > 0 {
		q.Set("dial timeout", strconv.Itoa(int((s.ConnectTimeout+999_999_999)/1_000_000_000)))
	}
	q.Set("app name", "backupcycle")
	u := url.URL{Scheme: "sqlserver", User: url.UserPassword(s.User, password), Host: s.Address, RawQuery: q.Encode()}
	return u.String()
}

// String is the location as a URL, for logs (it never holds credentials).
func (l Location) String() string {
	if l.Scheme == "smb" {
		u := url.URL{Scheme: "smb", Host: net.JoinHostPort(l.Host, strconv.Itoa(l.Port)), Path: "/" + path.Join(l.Share, l.Dir)}
		return u.String()
	}
	return (&url.URL{Scheme: "file", Path: l.Path}).String()
}

// AvailabilityGroup returns the availability group with that name.
func (c *Config) AvailabilityGroup(name string) (*AvailabilityGroup, bool) {
	for i := range c.AvailabilityGroups {
		if c.AvailabilityGroups[i].Name == name {
			return &c.AvailabilityGroups[i], true
		}
	}
	return nil, false
}

// GroupOf returns the availability group instance is a replica of.
func (c *Config) GroupOf(instance string) (*AvailabilityGroup, bool) {
	for i := range c.AvailabilityGroups {
		if slices.Contains(c.AvailabilityGroups[i].Replicas, instance) {
			return &c.AvailabilityGroups[i], true
		}
	}
	return nil, false
}

// Sources are the SQL instances a database of key is read from: the
// replicas of the availability group key, in their order, or the instance
// key itself.
func (c *Config) Sources(key string) []string {
	if g, ok := c.AvailabilityGroup(key); ok {
		return g.Replicas
	}
	return []string{key}
}

// SQLName is the group's name on SQL Server (sys.availability_groups.name).
func (g *AvailabilityGroup) SQLName() string {
	if g.AvailabilityGroup != "" {
		return g.AvailabilityGroup
	}
	return g.Name
}

// Former are the instance keys the sets of the group's databases may have
// been written under before the group was configured: its replicas, then
// its aliases.
func (g *AvailabilityGroup) Former() []string {
	return append(slices.Clone(g.Replicas), g.Aliases...)
}

// Source is the SQL instance a cycle of db reads from: the replica its
// plan chose for a database of an availability group, else its instance.
func (db *Database) Source() string {
	if db.Replica != "" {
		return db.Replica
	}
	return db.Instance
}
