package config

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

// A Windows source and a Linux verification instance share the backup
// servers: the source writes through the UNC paths, the Linux instance
// reads the same files where the share is mounted on its host.
const mixedPlatforms = `sql_instances:
  - name: sql01
    address: sql01:1433
    user: backup
    password_env: SQL01_PASSWORD
  - name: verify
    address: verify:1433
    user: backup
    password_env: VERIFY_PASSWORD
    platform: linux
backup_servers:
  - name: bak01
    unc_paths: ['\\10.0.2.2\backup', '\\10.0.3.2\backup']
    sql_paths:
      verify: [/mnt/bak01]
    location: /srv/bak01
    verify_instance: verify
    restore_data_dir: /var/opt/mssql/data
    restore_log_dir: /var/opt/mssql/log
  - name: bak02
    unc_paths: ['\\10.0.4.2\backup']
    sql_paths: {verify: [/mnt/bak02]}
    location: /srv/bak02
    verify_instance: verify
    restore_data_dir: /var/opt/mssql/data
    restore_log_dir: /var/opt/mssql/log
databases:
  - name: Sales
    instance: sql01
    backup_servers: [bak01, bak02]
`

// Each instance uses its own paths to a backup server: sql_paths where
// given, unc_paths otherwise.
func TestPerInstancePaths(t *testing.T) {
	cfg, err := Parse([]byte(mixedPlatforms), "mixed.yaml")
	if err != nil {
		t.Fatal(err)
	}
	bak01, _ := cfg.BackupServer("bak01")
	if got := bak01.PathsFor("sql01"); !slices.Equal(got, []string{`\\10.0.2.2\backup`, `\\10.0.3.2\backup`}) {
		t.Errorf("sql01's paths to bak01: %v", got)
	}
	if got := bak01.PathsFor("verify"); !slices.Equal(got, []string{"/mnt/bak01"}) {
		t.Errorf("verify's paths to bak01: %v", got)
	}
	verify, _ := cfg.SQLInstance("verify")
	if verify.Platform != PlatformLinux {
		t.Errorf("platform %q", verify.Platform)
	}
	if sql01, _ := cfg.SQLInstance("sql01"); sql01.Platform != "" {
		t.Errorf("an instance that declares no platform: %q (detected later)", sql01.Platform)
	}
}

// Mistakes in per-instance paths and platforms are refused at load, at
// their lines, with the fix.
func TestPerInstancePathErrors(t *testing.T) {
	cases := []struct {
		name     string
		old, new string
		want     []want
	}{
		{"an instance that is not configured", "      verify: [/mnt/bak01]", "      verfy: [/mnt/bak01]",
			// and verify, left with the UNC paths, is told what to give it
			[]want{{15, `backup_servers[0] (bak01): sql_paths names instance "verfy", which is not defined in sql_instances (defined: sql01, verify)`},
				{13, `backup_servers[0] (bak01): verify is platform: linux, and SQL Server on Linux cannot open UNC paths`}}},
		{"a path SQL Server cannot use", "      verify: [/mnt/bak01]", "      verify: [mnt/bak01]",
			[]want{{15, `backup_servers[0] (bak01): sql_paths.verify[0] "mnt/bak01" is not a path SQL Server can write to`}}},
		{"no paths", "      verify: [/mnt/bak01]", "      verify: []",
			[]want{{15, `backup_servers[0] (bak01): sql_paths.verify lists no path`}}},
		{"an unknown platform", "    platform: linux", "    platform: macos",
			[]want{{10, `sql_instances[1] (verify): platform "macos": use windows or linux, or leave it out (detected from sys.dm_os_host_info)`}}},
		{"UNC paths for a Linux instance", "    sql_paths:\n      verify: [/mnt/bak01]\n", "",
			[]want{{13, `backup_servers[0] (bak01): verify is platform: linux, and SQL Server on Linux cannot open UNC paths (\\10.0.2.2\backup): give it the directory where the share is mounted on its host, sql_paths: {verify: [/mnt/bak01]}`}}},
		{"a UNC path in a Linux instance's sql_paths", "    sql_paths: {verify: [/mnt/bak02]}", `    sql_paths: {verify: ['\\10.0.4.2\backup']}`,
			[]want{{22, `backup_servers[1] (bak02): verify is platform: linux, and SQL Server on Linux cannot open UNC paths (\\10.0.4.2\backup)`}}},
		{"a Linux source with UNC paths", "    password_env: SQL01_PASSWORD\n", "    password_env: SQL01_PASSWORD\n    platform: linux\n",
			[]want{{14, `backup_servers[0] (bak01): sql01 is platform: linux, and SQL Server on Linux cannot open UNC paths`},
				{22, `backup_servers[1] (bak02): sql01 is platform: linux`}}},
		{"restore directories in Windows syntax for a Linux instance", "    restore_data_dir: /var/opt/mssql/data\n    restore_log_dir: /var/opt/mssql/log\n  - name: bak02",
			"    restore_data_dir: 'D:\\data'\n    restore_log_dir: /var/opt/mssql/log\n  - name: bak02",
			[]want{{18, `backup_servers[0] (bak01): restore_data_dir "D:\data" is a Windows path, but verify_instance verify is platform: linux: use a directory of its host, e.g. /var/opt/mssql/data`}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if !strings.Contains(mixedPlatforms, tc.old) {
				t.Fatalf("the configuration has no %q", tc.old)
			}
			_, err := Parse([]byte(strings.Replace(mixedPlatforms, tc.old, tc.new, 1)), "mixed.yaml")
			var errs Errors
			if !errors.As(err, &errs) {
				t.Fatalf("got %v, want errors", err)
			}
			for _, w := range tc.want {
				found := false
				for _, e := range errs {
					if e.Line == w.line && strings.Contains(e.Msg, w.msg) {
						found = true
					}
				}
				if !found {
					t.Errorf("want line %d %q in:\n%v", w.line, w.msg, err)
				}
			}
			if len(errs) != len(tc.want) {
				t.Errorf("%d errors, want %d:\n%v", len(errs), len(tc.want), err)
			}
		})
	}
}

// Every path an instance uses is checked against MAX_PATH with the longest
// stripe name, its per-instance paths too.
func TestPerInstancePathLength(t *testing.T) {
	long := "/mnt/" + strings.Repeat("d", 230)
	_, err := Parse([]byte(strings.Replace(mixedPlatforms, "      verify: [/mnt/bak01]", "      verify: ["+long+"]", 1)), "mixed.yaml")
	if err == nil || !strings.Contains(err.Error(), "stripe path") || !strings.Contains(err.Error(), "sql_paths") {
		t.Errorf("a per-instance path over MAX_PATH: %v", err)
	}
}
