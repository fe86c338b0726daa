package preflight

import (
	"context"

	"github.com/backupcycle/backupcycle/internal/config"
	"github.com/backupcycle/backupcycle/internal/storage/location"
	"github.com/backupcycle/backupcycle/internal/storage/s3"
)

// objectStoreChecks check a kind: s3 backup server as the worker reaches
// it: the bucket opens with its key, keeps a locked object (the probe the
// worker runs before its first copy), and the key may do no more than the
// worker needs (s3.Store.Privileges). Both leave small locked objects under
// <prefix>backupcycle-probe/ that the bucket's lifecycle rule removes.
// Without probe (the worker's start) the bucket is only opened.
func objectStoreChecks(ctx context.Context, srv *config.BackupServer, probe bool) []Check {
	base := Check{Kind: KindServer, Server: srv.Name}
	open := base
	open.Name, open.For = "open", "immutable copies"
	st, err := location.OpenObjectStore(ctx, srv, s3.Lock{})
	if err != nil {
		open.Status, open.Detail = Missing, err.Error()
		open.Fix = "check endpoint, bucket, access_key_id and the secret access key reference under s3: of backup server " + srv.Name
		return []Check{otherQueue(open, srv, "bucket "+srv.S3.Bucket)}
	}
	defer st.Close()
	open.Status, open.Detail = OK, "opened "+st.Location()
	cs := []Check{open}
	if !probe {
		return cs
	}

	imm := base
	imm.Name, imm.For = "immutable", "immutable copies: nobody, the worker's key included, deletes a locked copy"
	res, err := st.Probe(ctx, srv.S3.LockMode)
	switch {
	case err != nil:
		imm.Status, imm.Detail = Warn, "the probe could not finish: "+err.Error()
		imm.Fix = storageFix(srv, err)
	case res.Immutable:
		imm.Status, imm.Detail = OK, res.Summary()
	default:
		imm.Status, imm.Detail = Missing, res.Summary()+"; no copy goes there until the probe passes"
		imm.Fix = "create the bucket with Object Lock enabled and deny the worker's user what the README's policy denies " +
			"(\"Immutable copies on object storage\"), or use lock_mode: compliance"
	}
	cs = append(cs, imm)

	privs, err := st.Privileges(ctx)
	if err != nil {
		c := base
		c.Name, c.For = "least privilege", "a stolen key does no more than the worker needs"
		c.Status, c.Detail = Warn, "not checked: "+err.Error()
		return append(cs, c)
	}
	for _, p := range privs {
		c := base
		c.Name, c.For = "least privilege: "+p.Name, "a stolen key does no more than the worker needs"
		c.Detail = p.Detail
		c.Status = OK
		if p.Excess {
			c.Status = Warn
			c.Detail = p.Says(srv.S3.AccessKeyID)
			c.Fix = p.Fix() + " (README \"Immutable copies on object storage\")"
			if p.Name == s3.PrivilegeBypass && srv.S3.LockMode == config.LockGovernance {
				c.Fix += ", or use lock_mode: compliance"
			}
		}
		cs = append(cs, c)
	}
	return cs
}
