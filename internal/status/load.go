package status

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"sort"
	"sync"
	"time"

	"github.com/backupcycle/backupcycle/internal/catalog"
	"github.com/backupcycle/backupcycle/internal/config"
	"github.com/backupcycle/backupcycle/internal/storage"
	"github.com/backupcycle/backupcycle/internal/storage/location"
)

// Server is what was read from one backup server.
type Server struct {
	Name      string `json:"name"`
	Location  string `json:"location"`
	Manifests int    `json:"manifests"`
	// Broken maps a manifest file that could not be read to why.
	Broken map[string]string `json:"broken,omitempty"`
	// Error says why the server could not be listed; its sets are missing
	// from the answer.
	Error string `json:"error,omitempty"`
}

// Report is the answer for every database of a configuration.
type Report struct {
	At time.Time `json:"at"`
	// Authentication is how the manifests were read: AuthenticationOff
	// without manifest keys (every manifest is taken at its word), else
	// AuthenticationHMAC (only the workers' signed manifests count).
	Authentication string     `json:"manifest_authentication"`
	Databases      []Database `json:"databases"`
	Servers        []Server   `json:"servers"`
	// ObjectStores are the kind: s3 backup servers and their newest
	// immutability probe.
	ObjectStores []ObjectStore `json:"object_stores,omitempty"`
}

// NotImmutable lists the object stores whose newest probe found them not
// immutable.
func (r Report) NotImmutable() []ObjectStore {
	var out []ObjectStore
	for _, o := range r.ObjectStores {
		if o.NotImmutable() {
			out = append(out, o)
		}
	}
	return out
}

// Report.Authentication values.
const (
	AuthenticationOff  = "off"
	AuthenticationHMAC = "hmac-sha256"
)

// OutOfObjectives lists the databases that are out of their objectives.
func (r Report) OutOfObjectives() []Database {
	var out []Database
	for _, d := range r.Databases {
		if d.OutOfObjectives {
			out = append(out, d)
		}
	}
	return out
}

// Incomplete lists the servers that could not be listed.
func (r Report) Incomplete() []Server {
	var out []Server
	for _, s := range r.Servers {
		if s.Error != "" {
			out = append(out, s)
		}
	}
	return out
}

// OpenFunc opens a backup server's directory.
type OpenFunc func(ctx context.Context, srv *config.BackupServer) (storage.Storage, error)

// Open opens a backup server's directory as the configuration describes it,
// resolving the SMB password reference at this moment.
func Open(ctx context.Context, srv *config.BackupServer) (storage.Storage, error) {
	return location.OpenServer(ctx, srv)
}

// Load reads the manifests of every backup server of c (in parallel; open
// nil means Open), authenticated with c's manifest keys resolved now, and
// summarizes them at now. A server that cannot be read is reported in
// Report.Servers, not as an error: the others still answer. When a
// manifest key is configured but cannot be read here, no server is read:
// without it no manifest can be told from a planted one.
func Load(ctx context.Context, c *config.Config, open OpenFunc, now time.Time) Report {
	if open == nil {
		open = Open
	}
	// The shares hold the manifests; an object store's copies are
	// recorded in them (catalog.Manifest.Immutable).
	var shares []*config.BackupServer
	for i := range c.BackupServers {
		if !c.BackupServers[i].IsObjectStore() {
			shares = append(shares, &c.BackupServers[i])
		}
	}
	servers := make([]Server, len(shares))
	found := make([][]Found, len(shares))
	chains := make([][]FoundChain, len(shares))
	drills := make([][]FoundDrill, len(shares))
	instances := InstancesOf(c)
	targets, defaults := TargetsOf(c)
	keys, kerr := c.ManifestKeyRing()
	var wg sync.WaitGroup
	for i := range shares {
		if kerr != nil {
			srv := shares[i]
			servers[i] = Server{Name: srv.Name, Location: srv.Loc.String(), Error: fmt.Sprintf(
				"manifests not read: %v: give this command the manifest keys the workers have (the same key_env or key_file), or no manifest can be authenticated", kerr)}
			continue
		}
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			servers[i], found[i], chains[i], drills[i] = readServer(ctx, shares[i], open, instances, keys, targets)
		}(i)
	}
	wg.Wait()
	var all []Found
	for _, f := range found {
		all = append(all, f...)
	}
	var allChains []FoundChain
	for _, f := range chains {
		allChains = append(allChains, f...)
	}
	auth := AuthenticationOff
	if len(c.ManifestKeys) > 0 {
		auth = AuthenticationHMAC
	}
	r := Report{At: now.UTC(), Authentication: auth, Databases: SummarizeAll(now, targets, defaults, all, AliasesOf(c), allChains),
		Servers: servers}
	var allDrills []FoundDrill
	for _, f := range drills {
		allDrills = append(allDrills, f...)
	}
	judgeDrills(now, r.Databases, allDrills)
	if kerr == nil {
		r.ObjectStores = loadObjectStores(ctx, c, nil, all)
		judgeImmutable(r.Databases, r.ObjectStores)
	}
	return r
}

// InstancesOf are the instance keys whose sets c reports on: its SQL
// instances, its availability groups with their former keys, and the
// instance of every databases: entry. Manifests of any other instance on a
// backup server (another installation's, or planted by anyone who can
// write the share) are not read: no line, no alert, no metric.
func InstancesOf(c *config.Config) []string {
	seen := map[string]bool{}
	var out []string
	add := func(names ...string) {
		for _, n := range names {
			if n != "" && !seen[n] {
				seen[n] = true
				out = append(out, n)
			}
		}
	}
	for _, in := range c.SQLInstances {
		add(in.Name)
	}
	for i := range c.AvailabilityGroups {
		add(c.AvailabilityGroups[i].Name)
		add(c.AvailabilityGroups[i].Former()...)
	}
	for _, db := range c.Databases {
		add(db.Instance)
	}
	sort.Strings(out)
	return out
}

// readServer reads one server's manifests, and the log chain records of
// the databases of targets with log backups.
func readServer(ctx context.Context, srv *config.BackupServer, open OpenFunc, instances []string, keys *catalog.Keys,
	targets []Target) (Server, []Found, []FoundChain, []FoundDrill) {
	s := Server{Name: srv.Name, Location: srv.Loc.String()}
	st, err := open(ctx, srv)
	if err != nil {
		s.Error = fmt.Sprintf("open backup server %s (%s): %v: check that it is reachable and its location and credentials in the config", srv.Name, s.Location, err)
		return s, nil, nil, nil
	}
	defer st.Close()
	l, err := catalog.ListInstances(ctx, ReadOnlyFS(st), keys, instances)
	if err != nil {
		s.Error = fmt.Sprintf("list manifests on backup server %s (%s): %v", srv.Name, s.Location, err)
		return s, nil, nil, nil
	}
	chains, brokenChains := readChains(ctx, ReadOnlyFS(st), keys, srv.Name, targets)
	drills, brokenDrills := readDrills(ctx, ReadOnlyFS(st), keys, srv.Name, targets)
	maps.Copy(brokenChains, brokenDrills)
	for name, err := range brokenChains {
		if l.Broken == nil {
			l.Broken = map[string]error{}
		}
		l.Broken[name] = errors.New(err)
	}
	out := make([]Found, len(l.Manifests))
	for i, m := range l.Manifests {
		out[i] = Found{Server: srv.Name, Manifest: m}
	}
	s.Manifests = len(out)
	if len(l.Broken) > 0 {
		s.Broken = map[string]string{}
		names := make([]string, 0, len(l.Broken))
		for n := range l.Broken {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			s.Broken[n] = l.Broken[n].Error()
		}
	}
	return s, out, chains, drills
}

// ErrReadOnly is returned by the writing methods of ReadOnlyFS.
var ErrReadOnly = errors.New("status reads manifests and never writes them")

// ReadOnlyFS adapts a storage to the catalog's file access for reading:
// status must not change what it reports on.
func ReadOnlyFS(st storage.Storage) catalog.FS { return readFS{st} }

type readFS struct{ st storage.Storage }

func (f readFS) ReadFile(ctx context.Context, name string) ([]byte, error) {
	return storage.ReadFile(ctx, f.st, name)
}

func (f readFS) List(ctx context.Context, prefix, suffix string) ([]catalog.FileInfo, error) {
	return catalog.ListStorage(ctx, f.st, prefix, suffix)
}

func (readFS) Create(context.Context, string) (io.WriteCloser, error) { return nil, ErrReadOnly }
func (readFS) Rename(context.Context, string, string) error           { return ErrReadOnly }
func (readFS) Remove(context.Context, string) error                   { return ErrReadOnly }
