package config

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// base is a small valid configuration; the cases below edit it, so its line
// numbers matter (they are noted on the right).
const base = `sql_instances:
  - name: sql01
    address: sql01:1433
    user: backup
    password_env: SQL01_PASSWORD
  - name: verify
    address: verify:1433
    user: backup
    password_file: secrets/verify.txt
backup_servers:
  - name: bak01
    unc_paths: ['\\10.0.2.2\backup', '\\10.0.3.2\backup']
    location: /srv/bak01
    verify_instance: verify
    restore_data_dir: /data
    restore_log_dir: /log
  - name: bak02
    unc_paths: ['\\10.0.4.2\backup']
    location: smb://bak02/backup/sql
    smb: {user: backup, password_env: BAK_PW}
    verify_instance: verify
    restore_data_dir: /data
    restore_log_dir: /log
databases:
  - name: Sales
    instance: sql01
    backup_servers: [bak01, bak02]
`

// Line numbers in base.
const (
	lSQL01      = 2
	lPassEnv    = 5
	lUser       = 4
	lBak02Loc   = 19
	lDB         = 25
	lDBInstance = 26
	lRotation   = 27
	lAfterDB    = 28 // first line appended after base
)

func edit(t *testing.T, old, new string) string {
	t.Helper()
	if !strings.Contains(base, old) {
		t.Fatalf("base has no %q", old)
	}
	return strings.Replace(base, old, new, 1)
}

type want struct {
	line int
	msg  string // substring of the message
}

func TestErrors(t *testing.T) {
	cases := []struct {
		name string
		yaml func(t *testing.T) string
		want []want
		// never must not appear in any message (secrets).
		never string
	}{
		{
			name: "unknown key with suggestion",
			yaml: func(t *testing.T) string { return edit(t, "    password_env: SQL01", "    pasword_env: SQL01") },
			// Not also "missing password_env": the typo is the one thing to fix.
			want: []want{{lPassEnv, `unknown key "pasword_env" in sql_instances[0] (did you mean "password_env"?)`}},
		},
		{
			// It was a database policy key; a copy's limit is now the server's, shared.
			name: "bandwidth_limit moved to the backup server",
			yaml: func(t *testing.T) string { return base + "    bandwidth_limit: 2MiB\n" },
			want: []want{{lAfterDB, `databases[0]: bandwidth_limit is set per backup server: move it to backup_servers[].bandwidth_limit`}},
		},
		{
			name: "unknown key without a close match lists the known keys",
			yaml: func(t *testing.T) string { return base + "    colour: blue\n" },
			want: []want{{lAfterDB, `unknown key "colour" in databases[0] (known keys: backup_server_wait, backup_servers,`}},
		},
		{
			name: "unknown top-level key",
			yaml: func(t *testing.T) string { return edit(t, "databases:", "databses:") },
			want: []want{{lDB - 1, `unknown key "databses" in the top level (did you mean "databases"?)`}},
		},
		{
			name: "missing required field",
			yaml: func(t *testing.T) string { return edit(t, "    address: sql01:1433\n", "") },
			want: []want{{lSQL01, `missing required key "address" in sql_instances[0] (sql01) (host:port of the SQL Server`}},
		},
		{
			name: "missing database instance",
			yaml: func(t *testing.T) string { return edit(t, "    instance: sql01\n", "") },
			want: []want{{lDB, `missing required key "instance" in databases[0] (Sales)`}},
		},
		{
			// yaml.v3 reports the line where the unclosed construct's context starts.
			name: "bad YAML gives the parser's line",
			yaml: func(t *testing.T) string {
				return edit(t, "    user: backup\n    password_env", "    user: [backup\n    password_env")
			},
			want: []want{{3, `invalid YAML: did not find expected ',' or ']'`}},
		},
		{
			name: "tab indentation is bad YAML",
			yaml: func(t *testing.T) string {
				return edit(t, "    user: backup\n    password_env", "\tuser: backup\n    password_env")
			},
			want: []want{{3, `invalid YAML: found a tab character that violates indentation`}},
		},
		{
			name:  "inline password",
			yaml:  func(t *testing.T) string { return edit(t, "password_env: SQL01_PASSWORD", "password: hunter2") },
			want:  []want{{lPassEnv, `sql_instances[0]: inline password is not allowed: use password_env: VARIABLE (an environment variable of the worker) or password_file: PATH`}},
			never: "hunter2",
		},
		{
			name: "inline smb password",
			yaml: func(t *testing.T) string {
				return edit(t, "{user: backup, password_env: BAK_PW}", "{user: backup, password: hunter2}")
			},
			want:  []want{{20, `backup_servers[1].smb: inline password is not allowed`}},
			never: "hunter2",
		},
		{
			name:  "password in the location URL",
			yaml:  func(t *testing.T) string { return edit(t, "smb://bak02/", "smb://backup:hunter2@bak02/") },
			want:  []want{{lBak02Loc, `backup_servers[1] (bak02): location: inline password is not allowed`}},
			never: "hunter2",
		},
		{
			name: "a secret pasted into password_env is not echoed",
			yaml: func(t *testing.T) string { return edit(t, "password_env: SQL01_PASSWORD", "password_env: 'S3cr#t!'") },
			want: []want{{lPassEnv, `sql_instances[0] (sql01): password_env is not an environment variable name (letters, digits, _; e.g. SQL01_PASSWORD): ` +
				`it looks like the password itself`}},
			never: "S3cr#t!",
		},
		{
			name: "a secret pasted into password_file is not echoed",
			yaml: func(t *testing.T) string {
				return edit(t, "password_file: secrets/verify.txt", "password_file: 'S3cr3t!pass'")
			},
			want:  []want{{lUser + 5, `sql_instances[1] (verify): password_file names no file next to the configuration and has no directory in it: it looks like the password itself`}},
			never: "S3cr3t!pass",
		},
		{
			name:  "a secret pasted into the SMB password_env is not echoed",
			yaml:  func(t *testing.T) string { return edit(t, "password_env: BAK_PW", "password_env: 'hunter2!'") },
			want:  []want{{lBak02Loc + 1, `backup_servers[1] (bak02).smb: password_env is not an environment variable name`}},
			never: "hunter2!",
		},
		{
			name:  "a secret pasted into api_key_env is not echoed",
			yaml:  func(t *testing.T) string { return "temporal: {api_key_env: 'k3y-V@lue'}\n" + base },
			want:  []want{{1, `temporal: api_key_env is not an environment variable name`}},
			never: "k3y-V@lue",
		},
		{
			name: "both password_env and password_file",
			yaml: func(t *testing.T) string {
				return edit(t, "password_env: SQL01_PASSWORD\n", "password_env: SQL01_PASSWORD\n    password_file: /run/pw\n")
			},
			want: []want{{lPassEnv + 1, `sql_instances[0] (sql01): password_env and password_file are both set: keep one`}},
		},
		{
			name: "database names an unknown instance",
			yaml: func(t *testing.T) string { return edit(t, "instance: sql01", "instance: sql9") },
			want: []want{{lDBInstance, `databases[0] (Sales): instance "sql9" is not defined in sql_instances (defined: sql01, verify)`}},
		},
		{
			name: "database names an unknown backup server",
			yaml: func(t *testing.T) string { return edit(t, "[bak01, bak02]", "[bak01, bak03]") },
			want: []want{{lRotation, `databases[0] (Sales): backup server "bak03" is not defined in backup_servers (defined: bak01, bak02)`}},
		},
		{
			name: "verify_instance names an unknown instance",
			yaml: func(t *testing.T) string {
				return edit(t, "    verify_instance: verify\n    restore_data_dir: /data\n    restore_log_dir: /log\n  - name: bak02", "    verify_instance: verify2\n    restore_data_dir: /data\n    restore_log_dir: /log\n  - name: bak02")
			},
			want: []want{{14, `backup_servers[0] (bak01): verify_instance "verify2" is not defined in sql_instances (defined: sql01, verify)`}},
		},
		{
			name: "stripes above 64",
			yaml: func(t *testing.T) string { return base + "    stripes: 65\n" },
			want: []want{{lAfterDB, `databases[0].stripes: "65" is out of range: use a stripe count from 1 to 64 (SQL Server's limit of backup devices) or "auto"`}},
		},
		{
			name: "stripes zero",
			yaml: func(t *testing.T) string { return base + "    stripes: 0\n" },
			want: []want{{lAfterDB, `databases[0].stripes: "0" is out of range`}},
		},
		{
			name: "max_transfer_size not a multiple of 64KiB",
			yaml: func(t *testing.T) string { return base + "    max_transfer_size: 4MB\n" },
			want: []want{{lAfterDB, `databases[0] (Sales): max_transfer_size 4000000 bytes is not a multiple of 64KiB (did you mean 4MiB?): SQL Server accepts 64KiB..4MiB in 64KiB steps`}},
		},
		{
			name: "max_transfer_size above 4MiB",
			yaml: func(t *testing.T) string { return base + "    max_transfer_size: 8MiB\n" },
			want: []want{{lAfterDB, `databases[0] (Sales): max_transfer_size 8MiB is above 4MiB, SQL Server's maximum`}},
		},
		{
			name: "buffer_count out of range",
			yaml: func(t *testing.T) string { return base + "    buffer_count: 9223372036854775807\n" },
			want: []want{{lAfterDB, `databases[0] (Sales): buffer_count 9223372036854775807 is out of range: use 1..1048576, or 0 / leave it out to let SQL Server choose`}},
		},
		{
			name: "block_size not a power of two",
			yaml: func(t *testing.T) string { return base + "    block_size: 3000\n" },
			want: []want{{lAfterDB, `block_size 3000 is not one of 512, 1024, 2048, 4096, 8192, 16384, 32768, 65536`}},
		},
		{
			name: "block_size above 64KiB",
			yaml: func(t *testing.T) string { return base + "    block_size: 128KiB\n" },
			want: []want{{lAfterDB, `block_size 131072 is not one of`}},
		},
		{
			name: "memory budget exceeded, with the numbers",
			yaml: func(t *testing.T) string {
				return base + "    stripes: 8\n    buffer_count: 3000\n    max_transfer_size: 2MiB\n"
			},
			want: []want{{lAfterDB, `databases[0] (Sales): BUFFERCOUNT 3000 x MAXTRANSFERSIZE 2MiB = 5.9GiB exceeds memory_budget 2GiB (built-in default) (seed 004: SQL Server would fail with "insufficient system memory"): lower buffer_count or max_transfer_size, or raise memory_budget`}},
		},
		{
			name: "memory budget from defaults, values inherited",
			yaml: func(t *testing.T) string {
				return "defaults:\n  buffer_count: 300\n  memory_budget: 256MiB\n" + base + "    stripes: 4\n"
			},
			want: []want{{lAfterDB + 3, `BUFFERCOUNT 300 (from defaults) x MAXTRANSFERSIZE 1MiB (built-in default) = 300MiB exceeds memory_budget 256MiB (from defaults)`}},
		},
		{
			name: "invalid default reported once at the defaults line",
			yaml: func(t *testing.T) string { return "defaults:\n  sequence: daily\n" + base },
			want: []want{{2, `defaults: sequence "daily": use catalog (kept beside the manifests), table (DBBackup.Sequence in the database) or utc`}},
		},
		{
			name: "bad duration",
			yaml: func(t *testing.T) string { return base + "    copy_deadline: 6 hours\n" },
			want: []want{{lAfterDB, `databases[0].copy_deadline: "6 hours" is not a duration: use 30s, 15m, 2h or 7d`}},
		},
		{
			name: "bad size",
			yaml: func(t *testing.T) string { return base + "    memory_budget: lots\n" },
			want: []want{{lAfterDB, `databases[0].memory_budget: "lots" is not a size`}},
		},
		{
			name: "bad boolean",
			yaml: func(t *testing.T) string { return base + "    compression: yes please\n" },
			want: []want{{lAfterDB, `databases[0].compression: "yes please" is not a boolean: use true or false`}},
		},
		{
			name: "list expected",
			yaml: func(t *testing.T) string { return edit(t, "[bak01, bak02]", "bak01") },
			want: []want{{lRotation, `databases[0].backup_servers must be a list`}},
		},
		{
			name: "duplicate key",
			yaml: func(t *testing.T) string { return base + "    instance: sql02\n" },
			want: []want{{lAfterDB, `duplicate key "instance" in databases[0] (first at line 26)`}},
		},
		{
			name: "duplicate names",
			yaml: func(t *testing.T) string { return edit(t, "  - name: verify\n", "  - name: sql01\n") },
			want: []want{
				{6, `sql_instances[1] (sql01): name "sql01" is already used in sql_instances at line 2: names must be unique`},
				{14, `verify_instance "verify" is not defined`},
				{21, `verify_instance "verify" is not defined`},
			},
		},
		{
			name: "copy_to in the rotation",
			yaml: func(t *testing.T) string { return base + "    copy_to: bak02\n" },
			want: []want{{lAfterDB, `databases[0] (Sales): copy_to "bak02" is also in backup_servers, so a cycle would copy bak02 onto itself`}},
		},
		{
			name: "a single server and no copy target",
			yaml: func(t *testing.T) string { return edit(t, "[bak01, bak02]", "[bak01]") },
			want: []want{{lRotation, `a single backup server and no copy_to: the remote copy needs another server: set copy_to or list two servers in backup_servers`}},
		},
		{
			name: "copy target without a verify instance",
			yaml: func(t *testing.T) string {
				return edit(t, "    verify_instance: verify\n    restore_data_dir: /data\n    restore_log_dir: /log\ndatabases", "databases")
			},
			want: []want{{lDB - 3, `databases[0] (Sales): backup server "bak02" receives the remote copy but has no verify_instance`}},
		},
		{
			name: "verification on the source instance",
			yaml: func(t *testing.T) string {
				return edit(t, "    verify_instance: verify\n    restore_data_dir: /data\n    restore_log_dir: /log\ndatabases", "    verify_instance: sql01\n    restore_data_dir: /data\n    restore_log_dir: /log\ndatabases")
			},
			want: []want{{lDB, `backup server "bak02" verifies on sql01, the source instance itself`}},
		},
		{
			name: "verify instance without restore dirs",
			yaml: func(t *testing.T) string {
				return edit(t, "    restore_data_dir: /data\n    restore_log_dir: /log\n  - name: bak02", "  - name: bak02")
			},
			want: []want{
				{11, `missing required key "restore_data_dir" in backup_servers[0] (bak01)`},
				{11, `missing required key "restore_log_dir" in backup_servers[0] (bak01)`},
			},
		},
		{
			name: "bad UNC path",
			yaml: func(t *testing.T) string { return edit(t, `['\\10.0.4.2\backup']`, `['//10.0.4.2/backup']`) },
			want: []want{{18, `backup_servers[1] (bak02): unc_paths[0] "//10.0.4.2/backup" is not a path SQL Server can write to`}},
		},
		{
			name: "unsupported location scheme",
			yaml: func(t *testing.T) string { return edit(t, "smb://bak02/backup/sql", "ftp://bak02/backup") },
			want: []want{
				{lBak02Loc, `location "ftp://bak02/backup": scheme "ftp" is not supported`},
			},
		},
		{
			name: "smb location without credentials",
			yaml: func(t *testing.T) string { return edit(t, "    smb: {user: backup, password_env: BAK_PW}\n", "") },
			want: []want{{lBak02Loc, `missing required key "smb" in backup_servers[1] (bak02): an smb:// location needs smb: {user, password_env or password_file}`}},
		},
		{
			name: "smb location without a share",
			yaml: func(t *testing.T) string { return edit(t, "smb://bak02/backup/sql", "smb://bak02") },
			want: []want{{lBak02Loc, `location "smb://bak02": use smb://host[:port]/share[/dir]`}},
		},
		{
			name: "address without a port",
			yaml: func(t *testing.T) string { return edit(t, "address: sql01:1433", "address: sql01") },
			want: []want{{3, `sql_instances[0].address "sql01" is not host:port`}},
		},
		{
			name: "bad encrypt value",
			yaml: func(t *testing.T) string {
				return edit(t, "    user: backup\n    password_env", "    user: backup\n    encrypt: maybe\n    password_env")
			},
			want: []want{{lUser + 1, `sql_instances[0] (sql01): encrypt "maybe": use strict (TDS 8.0, TLS first), mandatory (whole session), optional (login at least) or disable`}},
		},
		{
			name: "sanity check with no expectation and one with two",
			yaml: func(t *testing.T) string {
				return base + "    sanity_checks:\n      - name: a\n        query: SELECT 1\n      - name: b\n        query: SELECT 1\n        equals: '1'\n        at_least: 1\n"
			},
			want: []want{
				{lAfterDB + 1, `missing expectation in databases[0] (Sales).sanity_checks[0] (a): set one of equals, at_least or max_age`},
				{lAfterDB + 3, `databases[0] (Sales).sanity_checks[1] (b): set only one of equals, at_least or max_age (found equals, at_least)`},
			},
		},
		{
			name: "sanity check without a query",
			yaml: func(t *testing.T) string { return base + "    sanity_checks:\n      - name: a\n        at_least: 1\n" },
			want: []want{{lAfterDB + 1, `missing required key "query" in databases[0] (Sales).sanity_checks[0] (a)`}},
		},
		{
			name: "grant_execute of a name that is no function's",
			yaml: func(t *testing.T) string {
				return base + "    sanity_checks:\n      - name: a\n        query: SELECT dbo.f()\n        equals: '1'\n        grant_execute: [dbo.f, Sales.dbo.f]\n"
			},
			want: []want{{lAfterDB + 4, `databases[0] (Sales).sanity_checks[0] (a): grant_execute[1] "Sales.dbo.f": name a function of the copy, as schema.function or function`}},
		},
		{
			name: "retention must keep a verified set",
			yaml: func(t *testing.T) string { return base + "    retention: {keep_verified: 0}\n" },
			want: []want{{lAfterDB, `retention.keep_verified must be at least 1`}},
		},
		{
			name: "backoff shorter than initial",
			yaml: func(t *testing.T) string { return base + "    sql_host_wait:\n      initial: 10m\n" },
			want: []want{{lAfterDB, `databases[0] (Sales): sql_host_wait.max_interval 5m0s is shorter than initial 10m0s`}},
		},
		{
			name: "verify_name with an unknown placeholder",
			yaml: func(t *testing.T) string { return base + "    verify_name: '{database}_v'\n" },
			want: []want{{lAfterDB, `verify_name "{database}_v": only {db}, {instance} and {seq} are replaced`}},
		},
		{
			name: "verification copies would collide",
			yaml: func(t *testing.T) string {
				return base + "  - name: Sales\n    instance: verify\n    backup_servers: [bak01, bak02]\n    copy_to: bak03\n" +
					"  - name: Stock\n    instance: sql01\n    backup_servers: [bak01, bak02]\n    verify_name: Sales_verify\n"
			},
			want: []want{
				{lAfterDB + 3, `databases[1] (Sales): copy_to "bak03" is not defined in backup_servers`},
				{lAfterDB + 4, `databases[2] (Stock): its verification copy "Sales_verify" on verify would collide with databases[0] (Sales)`},
			},
		},
		{
			name: "temporal mTLS needs both files",
			yaml: func(t *testing.T) string { return "temporal:\n  tls:\n    cert_file: c.pem\n" + base },
			want: []want{{2, `temporal.tls: cert_file and key_file go together`}},
		},
		{
			name: "inline API key",
			yaml: func(t *testing.T) string { return "temporal:\n  api_key: abc123\n" + base },
			want: []want{{2, `temporal: inline API key is not allowed: use api_key_env`}},
		},
		{
			name: "every error is reported, in line order",
			yaml: func(t *testing.T) string {
				s := edit(t, "    address: sql01:1433\n", "    adress: sql01:1433\n")
				s = strings.Replace(s, "instance: sql01", "instance: nope", 1)
				return s + "    stripes: 99\n"
			},
			want: []want{
				{3, `unknown key "adress" in sql_instances[0] (did you mean "address"?)`},
				{lDBInstance, `instance "nope" is not defined`},
				{lAfterDB, `stripes: "99" is out of range`},
			},
		},
		{
			name: "a mapping where a string belongs",
			yaml: func(t *testing.T) string {
				return edit(t, "user: backup\n    password_env", "user: {name: backup}\n    password_env")
			},
			want: []want{{lUser, `sql_instances[0].user must be a string, not a mapping`}},
		},
		{
			name: "same NIC path twice",
			yaml: func(t *testing.T) string {
				return edit(t, `['\\10.0.2.2\backup', '\\10.0.3.2\backup']`, `['\\10.0.2.2\backup', '\\10.0.2.2\Backup']`)
			},
			want: []want{{12, `backup_servers[0] (bak01): unc_paths[1] "\\10.0.2.2\Backup" is listed twice`}},
		},
		{
			name: "max_concurrent zero",
			yaml: func(t *testing.T) string {
				return edit(t, "    location: /srv/bak01\n", "    location: /srv/bak01\n    max_concurrent: 0\n")
			},
			want: []want{{14, `backup_servers[0] (bak01): max_concurrent must be at least 1`}},
		},
		{
			name: "negative bandwidth_limit",
			yaml: func(t *testing.T) string {
				return edit(t, "    location: /srv/bak01\n", "    location: /srv/bak01\n    bandwidth_limit: -1\n")
			},
			want: []want{{14, `backup_servers[0].bandwidth_limit: "-1" is not a size`}},
		},
		{
			name: "file URL with a host",
			yaml: func(t *testing.T) string { return edit(t, "location: /srv/bak01", "location: file://srv/bak01") },
			want: []want{{13, `location "file://srv/bak01": a file URL needs three slashes and an absolute path: file:///srv/backup`}},
		},
		{
			name: "smb port out of range",
			yaml: func(t *testing.T) string { return edit(t, "smb://bak02/", "smb://bak02:99999/") },
			want: []want{{lBak02Loc, `port "99999" is not a number from 1 to 65535`}},
		},
		{
			name: "smb options on a local location",
			yaml: func(t *testing.T) string {
				return edit(t, "    location: /srv/bak01\n", "    location: /srv/bak01\n    smb: {user: x, password_env: X}\n")
			},
			want: []want{{14, `backup_servers[0] (bak01): smb: is only used with an smb:// location`}},
		},
		{
			name: "temporal address with a scheme",
			yaml: func(t *testing.T) string { return "temporal:\n  address: http://temporal:7233\n" + base },
			want: []want{{2, `temporal.address "http://temporal:7233" must be host:port only`}},
		},
		{
			name: "a database name SQL Server cannot hold",
			yaml: func(t *testing.T) string { return edit(t, "name: Sales", "name: "+strings.Repeat("x", 129)) },
			want: []want{{lDB, `name is 129 characters (UTF-16, as SQL Server counts), longer than SQL Server's limit of 128`}},
		},
		{
			name: "empty file",
			yaml: func(t *testing.T) string { return "" },
			want: []want{{1, `the file is empty: start from config.example.yaml`}},
		},
		{
			name: "top level is not a mapping",
			yaml: func(t *testing.T) string { return "- a\n- b\n" },
			want: []want{{1, `the top level must be a mapping`}},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.yaml(t)), "config.yaml")
			if err == nil {
				t.Fatalf("no error; want %v", tc.want)
			}
			var es Errors
			if !errors.As(err, &es) {
				t.Fatalf("error is %T, want config.Errors: %v", err, err)
			}
			if len(es) != len(tc.want) {
				t.Errorf("got %d errors, want %d:\n%v", len(es), len(tc.want), err)
			}
			for i, w := range tc.want {
				if i >= len(es) {
					break
				}
				e := es[i]
				if e.Line != w.line || !strings.Contains(e.Msg, w.msg) || e.File != "config.yaml" {
					t.Errorf("error %d:\n got  %s\n want config.yaml:%d: ...%s...", i, e.Error(), w.line, w.msg)
				}
				if !strings.HasPrefix(e.Error(), fmt.Sprintf("config.yaml:%d: ", e.Line)) {
					t.Errorf("error %d does not start with file:line: %s", i, e.Error())
				}
			}
			if tc.never != "" && strings.Contains(err.Error(), tc.never) {
				t.Errorf("the secret %q leaks into the error:\n%v", tc.never, err)
			}
		})
	}
}

// The exact documented form of the most common mistake.
func TestUnknownKeyMessage(t *testing.T) {
	_, err := Parse([]byte(edit(t, "    password_env: SQL01", "    pasword_env: SQL01")), "config.yaml")
	const wantLine = `config.yaml:5: unknown key "pasword_env" in sql_instances[0] (did you mean "password_env"?)`
	if err == nil || !strings.Contains(err.Error(), wantLine+"\n") && !strings.HasSuffix(err.Error(), wantLine) {
		t.Fatalf("got:\n%v\nwant a line:\n%s", err, wantLine)
	}
}

func TestDefaultsApply(t *testing.T) {
	c, err := Parse([]byte(base), "/etc/backupcycle/config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if c.Temporal.Address != DefaultTemporalAddress || c.Temporal.Namespace != "default" || c.Temporal.TaskQueue != "backupcycle" || c.Temporal.TLS != nil {
		t.Errorf("temporal defaults: %+v", c.Temporal)
	}
	sql := c.SQLInstances[0]
	if sql.Encrypt != "mandatory" || sql.ConnectTimeout != 30*time.Second || sql.MaxConcurrent != 1 {
		t.Errorf("sql instance defaults: %+v", sql)
	}
	if got := c.SQLInstances[1].Password.File; got != "/etc/backupcycle/secrets/verify.txt" {
		t.Errorf("relative password_file resolves against the config's directory: %q", got)
	}
	b1, b2 := c.BackupServers[0], c.BackupServers[1]
	if b1.MaxConcurrent != 2 || b1.Loc != (Location{Scheme: "file", Path: "/srv/bak01"}) {
		t.Errorf("bak01: %+v", b1)
	}
	if b2.Loc != (Location{Scheme: "smb", Host: "bak02", Port: 445, Share: "backup", Dir: "sql"}) || b2.SMB.User != "backup" || b2.SMB.Password.Env != "BAK_PW" {
		t.Errorf("bak02: %+v %+v", b2.Loc, b2.SMB)
	}
	if c.Defaults != DefaultPolicy() {
		t.Errorf("defaults section: got %+v\nwant %+v", c.Defaults, DefaultPolicy())
	}
	if db := c.Databases[0]; db.Policy != DefaultPolicy() {
		t.Errorf("database inherits the built-in defaults: got %+v", db.Policy)
	}
}

func TestInheritance(t *testing.T) {
	src := "defaults:\n  compression: false\n  buffer_count: 32\n  retention: {keep_verified: 5}\n  sql_host_wait: {give_up_after: 4h}\n" +
		base + "    compression: true\n    retention: {delete_failed_after: 7d}\n    stripes: 4\n" +
		"  - name: Stock\n    instance: sql01\n    backup_servers: [bak02, bak01]\n    sequence: utc\n"
	c, err := Parse([]byte(src), "config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	sales, stock := c.Databases[0], c.Databases[1]
	if !sales.Compression || stock.Compression {
		t.Errorf("compression: Sales sets true, Stock inherits false: %v %v", sales.Compression, stock.Compression)
	}
	if sales.BufferCount != 32 || stock.BufferCount != 32 {
		t.Errorf("buffer_count inherited: %d %d", sales.BufferCount, stock.BufferCount)
	}
	// Nested sections inherit key by key.
	if sales.Retention != (Retention{KeepVerified: 5, DeleteFailedAfter: 7 * 24 * time.Hour}) {
		t.Errorf("Sales retention: %+v", sales.Retention)
	}
	if stock.Retention != (Retention{KeepVerified: 5, DeleteFailedAfter: 72 * time.Hour}) {
		t.Errorf("Stock retention: %+v", stock.Retention)
	}
	if want := (Backoff{Initial: 15 * time.Second, MaxInterval: 5 * time.Minute, GiveUpAfter: 4 * time.Hour}); stock.SQLHostWait != want {
		t.Errorf("sql_host_wait: %+v", stock.SQLHostWait)
	}
	if sales.Stripes != 4 || stock.Stripes != StripesAuto || stock.Sequence != SequenceUTC || sales.Sequence != SequenceCatalog {
		t.Errorf("stripes/sequence: %v %v %v %v", sales.Stripes, stock.Stripes, sales.Sequence, stock.Sequence)
	}
}

func TestAnchorsAndMergeKeys(t *testing.T) {
	src := strings.Replace(base, "  - name: bak02\n", "  - name: bak02\n    <<: &common {max_concurrent: 5, task_queue: q-bak}\n", 1) +
		"    <<: {stripes: 6, compression: false}\n    compression: true\n"
	c, err := Parse([]byte(src), "config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if b := c.BackupServers[1]; b.MaxConcurrent != 5 || b.TaskQueue != "q-bak" {
		t.Errorf("merged keys: %+v", b)
	}
	if db := c.Databases[0]; db.Stripes != 6 || !db.Compression {
		t.Errorf("merged stripes 6 and explicit compression override: %+v", db.Policy)
	}
}

// Names may hold any character SQL Server allows: quoting is internal/tsql's job.
func TestHostileAndWindowsNames(t *testing.T) {
	src := edit(t, "name: Sales", `name: "Sales]; DROP DATABASE x--'"`)
	src = strings.Replace(src, "location: /srv/bak01", `location: /srv/bak01
    unc_paths: ['D:\backup', '\\bak01\backup$\sql\']`, 1)
	src = strings.Replace(src, `    unc_paths: ['\\10.0.2.2\backup', '\\10.0.3.2\backup']`+"\n", "", 1)
	c, err := Parse([]byte(src), "config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if c.Databases[0].Name != "Sales]; DROP DATABASE x--'" || c.Databases[0].VerifyDatabaseName(1) != "Sales]; DROP DATABASE x--'_verify" {
		t.Errorf("name: %q", c.Databases[0].Name)
	}
	if got := c.BackupServers[0].UNCPaths; len(got) != 2 || got[0] != `D:\backup` || got[1] != `\\bak01\backup$\sql\` {
		t.Errorf("unc paths: %q", got)
	}
}

func TestRelativeLocation(t *testing.T) {
	src := edit(t, "location: /srv/bak01", "location: ../data/bak01")
	c, err := Parse([]byte(src), filepath.Join("/opt/bc/etc", "config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if got := c.BackupServers[0].Loc; got != (Location{Scheme: "file", Path: "/opt/bc/data/bak01"}) {
		t.Errorf("relative location: %+v", got)
	}
	src = edit(t, "location: /srv/bak01", "location: file:///srv/x")
	c, err = Parse([]byte(src), "config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if got := c.BackupServers[0].Loc; got != (Location{Scheme: "file", Path: "/srv/x"}) {
		t.Errorf("file URL: %+v", got)
	}
}

func TestSanityExpectations(t *testing.T) {
	src := base + "    sanity_checks:\n" +
		"      - {name: rows, query: SELECT COUNT(*) FROM t, at_least: 1000}\n" +
		"      - {name: fresh, query: SELECT MAX(d) FROM t, max_age: 1d2h}\n" +
		"      - {name: ok, query: SELECT 1, equals: 1, grant_execute: [fn_a, \"[app].[fn.b]\"]}\n"
	c, err := Parse([]byte(src), "config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	got := c.Databases[0].SanityChecks
	want := []SanityCheck{
		{Name: "rows", Query: "SELECT COUNT(*) FROM t", Expect: ExpectAtLeast, AtLeast: 1000},
		{Name: "fresh", Query: "SELECT MAX(d) FROM t", Expect: ExpectMaxAge, MaxAge: 26 * time.Hour},
		{Name: "ok", Query: "SELECT 1", Expect: ExpectEquals, Equals: "1", GrantExecute: []string{"fn_a", "[app].[fn.b]"}},
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("got  %+v\nwant %+v", got, want)
	}
}

func TestLoadMissingFile(t *testing.T) {
	_, err := Load(filepath.Join(t.TempDir(), "nope.yaml"))
	if err == nil || !strings.Contains(err.Error(), "nope.yaml") || !strings.Contains(err.Error(), "--config") {
		t.Fatalf("got %v", err)
	}
}
