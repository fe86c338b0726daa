package config

import (
	"strings"
	"testing"
	"time"
)

// vault is a kind: s3 server appended to base's backup_servers.
const vault = `  - name: vault01
    kind: s3
    s3:
      endpoint: https://s3.example.net:9000
      bucket: sql-worm
      prefix: backupcycle
      access_key_id: AKIAEXAMPLE
      secret_access_key_env: VAULT01_SECRET
    bandwidth_limit: 50MiB
`

func withVault(t *testing.T, server, dbExtra string) string {
	t.Helper()
	src := edit(t, "databases:\n", server+"databases:\n")
	return src + dbExtra
}

func TestObjectStoreServer(t *testing.T) {
	c, err := Parse([]byte(withVault(t, vault, "    immutable_copy: vault01\n")), "/etc/backupcycle/config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	v, _ := c.BackupServer("vault01")
	if !v.IsObjectStore() || v.S3.Prefix != "backupcycle/" || v.S3.Region != "us-east-1" || !v.S3.PathStyle || v.S3.LockMode != LockCompliance ||
		v.MaxConcurrent != DefaultServerConcurrency || v.BandwidthLimit != 50<<20 || v.S3.PartSize != 16<<20 {
		t.Errorf("vault01: %+v %+v", v, v.S3)
	}
	db := c.Databases[0]
	if db.ImmutableCopy != "vault01" || db.ImmutableLock() != 3*DefaultRPO {
		t.Errorf("Sales: immutable_copy %q, lock %s; want vault01 for (keep_verified 2 + 1) x rpo", db.ImmutableCopy, db.ImmutableLock())
	}
	if b, _ := c.BackupServer("bak01"); b.Kind != KindShare {
		t.Errorf("bak01 kind %q, want share", b.Kind)
	}
	t.Setenv("VAULT01_SECRET", "s3cr3t-value")
	if sk, err := v.SecretAccessKey(); err != nil || sk != "s3cr3t-value" {
		t.Errorf("SecretAccessKey() = %q, %v", sk, err)
	}

	c, err = Parse([]byte(withVault(t, vault, "    immutable_copy: vault01\n    retention: {immutable_for: 35d}\n")), "config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Databases[0].ImmutableLock(); got != 35*24*time.Hour {
		t.Errorf("immutable_for 35d: lock %s", got)
	}
}

// withPartSize is vault with s3.part_size v.
func withPartSize(v string) string {
	return strings.Replace(vault, "      secret_access_key_env: VAULT01_SECRET\n", "      secret_access_key_env: VAULT01_SECRET\n      part_size: "+v+"\n", 1)
}

// part_size: S3's limits, inclusive; the default 16 MiB.
func TestObjectStorePartSize(t *testing.T) {
	for _, tc := range []struct {
		given string
		want  Size
	}{{"8MiB", 8 << 20}, {"5MiB", 5 << 20}, {"5GiB", 5 << 30}} {
		c, err := Parse([]byte(withVault(t, withPartSize(tc.given), "")), "config.yaml")
		if err != nil {
			t.Fatalf("part_size %s: %v", tc.given, err)
		}
		if v, _ := c.BackupServer("vault01"); v.S3.PartSize != tc.want {
			t.Errorf("part_size %s: %d bytes, want %d", tc.given, v.S3.PartSize, tc.want)
		}
	}
}

func TestObjectStoreErrors(t *testing.T) {
	for _, tc := range []struct {
		name, src, want string
	}{
		{"inline secret", withVault(t, strings.Replace(vault, "secret_access_key_env: VAULT01_SECRET", "secret_access_key: abc/def+ghi", 1), ""),
			"inline secret access key is not allowed"},
		{"no secret", withVault(t, strings.Replace(vault, "      secret_access_key_env: VAULT01_SECRET\n", "", 1), ""),
			`missing required key "secret_access_key_env" or "secret_access_key_file"`},
		{"bad bucket", withVault(t, strings.Replace(vault, "bucket: sql-worm", "bucket: SQL_Worm", 1), ""), "is not an S3 bucket name"},
		{"no bucket", withVault(t, strings.Replace(vault, "      bucket: sql-worm\n", "", 1), ""), `missing required key "bucket"`},
		{"endpoint with path", withVault(t, strings.Replace(vault, "https://s3.example.net:9000", "https://s3.example.net/bucket", 1), ""),
			"use the server's URL"},
		{"share keys", withVault(t, strings.Replace(vault, "    kind: s3\n", "    kind: s3\n    location: /srv/x\n", 1), ""),
			"location is a share's setting"},
		{"bad mode", withVault(t, strings.Replace(vault, "access_key_id: AKIAEXAMPLE", "access_key_id: AKIAEXAMPLE\n      lock_mode: forever", 1), ""),
			`lock_mode "forever"`},
		{"part below 5 MiB", withVault(t, withPartSize("4MiB"), ""),
			"part_size 4MiB is below the 5MiB S3 takes for every part but the last: use at least 5MiB, or leave it out for 16MiB"},
		{"part of zero bytes", withVault(t, withPartSize("0"), ""), "part_size 0 bytes is below the 5MiB"},
		{"part above 5 GiB", withVault(t, withPartSize("6GiB"), ""),
			"part_size 6GiB is above the 5GiB S3 takes for a part: use at most 5GiB"},
		{"part not a size", withVault(t, withPartSize("lots"), ""), "part_size"},
		{"bad kind", withVault(t, strings.Replace(vault, "kind: s3", "kind: tape", 1), ""), `kind "tape"`},
		{"in the rotation", strings.Replace(withVault(t, vault, ""), "backup_servers: [bak01, bak02]", "backup_servers: [bak01, vault01]", 1),
			`backup server "vault01" is an object store (kind: s3): SQL Server cannot back up to it`},
		{"copy_to", withVault(t, vault, "    copy_to: vault01\n"), `copy_to "vault01" is an object store`},
		{"immutable_copy to a share", withVault(t, vault, "    immutable_copy: bak02\n"), `immutable_copy "bak02" is a share`},
		{"immutable_copy undefined", withVault(t, vault, "    immutable_copy: vault9\n"), `immutable_copy "vault9" is not defined`},
		{"lock shorter than retention", withVault(t, vault, "    immutable_copy: vault01\n    retention: {keep_verified: 7, immutable_for: 3d}\n"),
			"retention.immutable_for 72h0m0s is shorter than"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.src), "config.yaml")
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v\nwant an error containing %q", err, tc.want)
			}
			if strings.Contains(err.Error(), "abc/def+ghi") {
				t.Fatalf("the error quotes the secret: %v", err)
			}
		})
	}
	// Plain http to another host loads, with a warning.
	c, err := Parse([]byte(withVault(t, strings.Replace(vault, "https://s3.example.net:9000", "http://s3.example.net:9000", 1), "")), "config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Warnings) == 0 || !strings.Contains(c.Warnings[0].Error(), "plain http") {
		t.Errorf("warnings %v, want one about plain http", c.Warnings)
	}
}

// immutable_within: 24h by default, shorter when the backup servers keep
// a set for less than two days; given, positive and shorter than the time
// they keep a set, and only with an immutable_copy.
func TestImmutableWithin(t *testing.T) {
	c, err := Parse([]byte(withVault(t, vault, "    immutable_copy: vault01\n")), "config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Databases[0].ImmutableDeadline(); got != DefaultImmutableWithin {
		t.Errorf("default immutable_within %s, want %s", got, DefaultImmutableWithin)
	}
	c, err = Parse([]byte(withVault(t, vault, "    immutable_copy: vault01\n    rpo: 8h\n    retention: {keep_verified: 3}\n")), "config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Databases[0].ImmutableDeadline(); got != 12*time.Hour {
		t.Errorf("immutable_within with sets kept 24h: %s, want half of it", got)
	}
	c, err = Parse([]byte(withVault(t, vault, "    immutable_copy: vault01\n    immutable_within: 6h\n")), "config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Databases[0].ImmutableDeadline(); got != 6*time.Hour {
		t.Errorf("immutable_within 6h: %s", got)
	}
	for _, tc := range []struct{ name, extra, want string }{
		{"zero", "    immutable_copy: vault01\n    immutable_within: 0s\n", "immutable_within must be positive"},
		{"negative", "    immutable_copy: vault01\n    immutable_within: -1h\n", "immutable_within must be positive"},
		{"without a copy", "    immutable_within: 6h\n", "immutable_within without immutable_copy"},
		{"not shorter than the sets are kept", "    immutable_copy: vault01\n    immutable_within: 52h\n",
			"immutable_within 52h0m0s is not shorter than the 52h0m0s the backup servers keep a set (keep_verified 2 x rpo 26h0m0s)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(withVault(t, vault, tc.extra)), "config.yaml")
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v\nwant an error containing %q", err, tc.want)
			}
		})
	}
	// In defaults: judged there, and for a database whose own rpo makes it too long.
	src := strings.Replace(withVault(t, vault, "    immutable_copy: vault01\n    rpo: 4h\n"), "databases:\n", "defaults:\n  immutable_within: 20h\ndatabases:\n", 1)
	if _, err := Parse([]byte(src), "config.yaml"); err == nil || !strings.Contains(err.Error(), "immutable_within 20h0m0s is not shorter than the 8h0m0s") {
		t.Errorf("defaults' immutable_within above a database's kept sets: %v", err)
	}
}
