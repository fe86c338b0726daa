package preflight

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	"github.com/backupcycle/backupcycle/internal/config"
	"github.com/backupcycle/backupcycle/internal/plan"
	"github.com/backupcycle/backupcycle/internal/storage"
)

// probeSize is the size of the probe file: enough for more than one SMB
// write, small enough for any share.
const probeSize = 64 << 10

// ProbePrefix starts the name of every probe file. It carries no '@', so
// no manifest or stripe pattern of the product ever matches it.
const ProbePrefix = "backupcycle-preflight-"

// need is what a backup server must hold: the planned sets of the
// databases that may write to it or copy to it.
type need struct {
	Planned   int64    // sum of planned set sizes (compressed as planned)
	Worst     int64    // the same without compression (incompressible data)
	Unknown   []string // databases whose size is unknown
	Databases []string
}

func (n need) describe() string {
	return fmt.Sprintf("planned sets of %s: %s (uncompressed %s)", strings.Join(n.Databases, ", "),
		plan.FormatBytes(n.Planned), plan.FormatBytes(n.Worst))
}

// probeStorage checks that the worker's credentials may list, write, read
// back and delete a file on the server's location, and compares its free
// space with n. The probe file has a unique name and is removed whatever
// fails after it was created.
func probeStorage(ctx context.Context, srv *config.BackupServer, open func(context.Context, *config.BackupServer) (storage.Storage, error), n need) []Check {
	base := Check{Kind: KindServer, Server: srv.Name}
	check := func(name, why string) Check {
		c := base
		c.Name, c.For = name, why
		return c
	}
	st, err := open(ctx, srv)
	if err != nil {
		c := check("open", "every step that reads or writes the backup files")
		c.Status, c.Detail = Missing, err.Error()
		c.Fix = storageFix(srv, err)
		return []Check{otherQueue(c, srv, srv.Location)}
	}
	defer st.Close()
	var cs []Check

	var raw [8]byte
	_, _ = rand.Read(raw[:])
	name := ProbePrefix + hex.EncodeToString(raw[:]) + ".tmp"
	data := make([]byte, probeSize)
	_, _ = rand.Read(data)

	wr := check("write", "the copy writes the remote stripes; manifests")
	rd := check("read back", "the copy reads the stripes; SHA-256 verification")
	del := check("delete", "retention, failed sets, the copy's partial files")
	created, werr := writeProbe(ctx, st, name, data)
	if werr != nil {
		wr.Status, wr.Detail, wr.Fix = Missing, werr.Error(), storageFix(srv, werr)
	} else {
		wr.Status, wr.Detail = OK, fmt.Sprintf("wrote %s (%s)", name, plan.FormatBytes(probeSize))
	}
	cs = append(cs, wr)
	cs = append([]Check{listProbe(ctx, st, check("list", "find the manifests and sets by their names (round robin, retention)"), srv, name, werr == nil)}, cs...)
	if werr == nil {
		if err := readProbe(ctx, st, name, data); err != nil {
			rd.Status, rd.Detail, rd.Fix = Missing, err.Error(), storageFix(srv, err)
		} else {
			rd.Status, rd.Detail = OK, "read back the same bytes"
		}
		cs = append(cs, rd)
	}
	if created && werr == nil {
		if c, ok := sharePrivilegeCheck(ctx, st, check("least privilege", "a stolen password does no more than the worker needs"), srv, name); ok {
			cs = append(cs, c)
		}
	}
	if created {
		// A context already cancelled must not leave the probe behind.
		if err := st.Remove(context.WithoutCancel(ctx), name); err != nil {
			del.Status = Missing
			del.Detail = err.Error() + "; the probe file " + name + " is still there"
			del.Fix = storageFix(srv, err) + "; then remove " + name + " from " + st.Location()
		} else {
			del.Status, del.Detail = OK, "removed "+name
		}
	} else {
		del.Status, del.Detail = Warn, "not checked: nothing could be written"
	}
	cs = append(cs, del)
	return append(cs, freeSpaceCheck(ctx, st, check("free space", "tonight's sets"), n))
}

// otherQueue turns an open failure of a server whose activities run on a
// task queue of their own into a warning: its bytes are moved by workers
// on that queue, which may reach locations this machine does not.
func otherQueue(c Check, srv *config.BackupServer, where string) Check {
	if srv.TaskQueue == "" {
		return c
	}
	c.Status = Warn
	c.Fix = "this machine cannot reach " + where + "; the server's activities run on task queue " +
		srv.TaskQueue + ": run preflight on a machine of that queue (" + c.Fix + ")"
	return c
}

// listProbe lists the location by a pattern, as every step does: by the
// probe's own name when it was written (the server must return it, and
// only what matches), else by the probe prefix.
func listProbe(ctx context.Context, st storage.Storage, c Check, srv *config.BackupServer, name string, written bool) Check {
	pattern := ProbePrefix
	if written {
		pattern = name
	}
	files, err := st.List(ctx, pattern, "")
	switch {
	case err != nil:
		c.Status, c.Detail, c.Fix = Missing, err.Error(), storageFix(srv, err)
	case written && (len(files) != 1 || files[0].Name != name):
		c.Status = Missing
		c.Detail = fmt.Sprintf("listing %s by the pattern %s* returned %d files, not the probe file just written", st.Location(), pattern, len(files))
		c.Fix = "the server must answer a directory query with a search pattern (SMB2 QUERY_DIRECTORY)"
	case written:
		c.Status, c.Detail = OK, fmt.Sprintf("found the probe file at %s by the pattern %s*", st.Location(), pattern)
	default:
		c.Status, c.Detail = OK, fmt.Sprintf("listed %s by the pattern %s*", st.Location(), pattern)
	}
	return c
}

// writeProbe creates name with data; created says whether the file exists
// (and must be removed).
func writeProbe(ctx context.Context, st storage.Storage, name string, data []byte) (created bool, err error) {
	w, err := st.Create(ctx, name)
	if err != nil {
		return false, err
	}
	if _, err := w.WriteAt(data, 0); err != nil {
		_ = w.Close()
		return true, err
	}
	if err := w.Sync(); err != nil {
		_ = w.Close()
		return true, err
	}
	return true, w.Close()
}

func readProbe(ctx context.Context, st storage.Storage, name string, want []byte) error {
	r, err := st.OpenRead(ctx, name)
	if err != nil {
		return err
	}
	defer r.Close()
	got := make([]byte, len(want))
	if _, err := r.ReadAt(got, 0); err != nil {
		return err
	}
	if !bytes.Equal(got, want) {
		return fmt.Errorf("%s on %s: %w: the bytes read back differ from those written", name, st.Location(), storage.ErrCorrupt)
	}
	return nil
}

func freeSpaceCheck(ctx context.Context, st storage.Storage, c Check, n need) Check {
	free, ok, err := st.FreeSpace(ctx)
	switch {
	case err != nil:
		c.Status, c.Detail = Warn, "unknown: "+err.Error()+"; "+n.describe()
		return c
	case !ok:
		c.Status, c.Detail = Warn, "unknown (the server does not report it); "+n.describe()
		return c
	}
	have := plan.FormatBytes(free) + " free"
	switch {
	case len(n.Databases) == 0:
		c.Status, c.Detail = OK, have+"; no configured database stores sets here"
	case len(n.Unknown) > 0:
		c.Status = Warn
		c.Detail = have + "; planned set size unknown: the size of " + strings.Join(n.Unknown, ", ") + " could not be read"
	case free < n.Planned:
		c.Status = Missing
		c.Detail = have + " < " + n.describe()
		c.Fix = fmt.Sprintf("free at least %s on %s (or lower keep_verified / let retention run)", plan.FormatBytes(n.Planned-free), st.Location())
	case free < n.Worst:
		c.Status = Warn
		c.Detail = have + ": enough for the " + n.describe() + " only if compression reaches the planned factor"
		c.Fix = fmt.Sprintf("free %s more on %s to be safe with incompressible data", plan.FormatBytes(n.Worst-free), st.Location())
	default:
		c.Status, c.Detail = OK, have+" >= "+n.describe()
	}
	return c
}

// storageFix says what to change for a storage failure.
func storageFix(srv *config.BackupServer, err error) string {
	switch {
	case errors.Is(err, storage.ErrAuth):
		return "check smb.user and the password reference of backup server " + srv.Name
	case errors.Is(err, storage.ErrShareNotFound):
		return "fix the share name in location: of backup server " + srv.Name
	case errors.Is(err, storage.ErrNotFound):
		return "create the directory " + srv.Location + " or fix location: of backup server " + srv.Name
	case errors.Is(err, storage.ErrPermission):
		user := "the worker's user"
		if srv.SMB != nil && srv.SMB.User != "" {
			user = "the SMB user " + srv.SMB.User
		}
		return "give " + user + " read, write and delete (modify) rights on " + srv.Location
	case errors.Is(err, storage.ErrNoSpace):
		return "free space on " + srv.Location
	case errors.Is(err, storage.ErrCorrupt):
		return "the server returned other bytes than were written: check its disk and the network path before trusting it with backups"
	case errors.Is(err, storage.ErrConnection):
		return "make " + srv.Location + " reachable from the worker (host, port 445, firewall)"
	}
	return "check location: and the credentials of backup server " + srv.Name
}
