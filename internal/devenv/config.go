package devenv

import (
	"fmt"
	"strings"
)

// configValues are the facts of one start that the configuration records.
type configValues struct {
	temporal, namespace string
	source, verify      string // host:port of the emulators
	passwordFile        string
	manifestKeyFile     string // the workers' manifest key
	evidenceKeyFile     string // the workers' evidence signing key
	evidencePublic      string // its public key
	uncs                map[string][]string
	locations           map[string]string // per backup server: smb:// URL or directory
	smbPasswords        map[string]string // password file per Samba-served server
	orders              int64
	fleet               bool // select sql01's databases for the Fleet
	logs                bool // Sales takes log backups (Options.LogBackups)
	drill               bool // Sales has drill: and rto: (Options.Drill)
	// vaultEndpoint and vaultSecret are the object store's URL and its
	// user's secret file (Options.ObjectStore); "" without one.
	vaultEndpoint, vaultSecret string
	taskQueues                 map[string]string // Options.TaskQueues
}

// yq quotes s as a YAML single-quoted scalar (backslashes stay literal).
func yq(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// configText is config.dev.yaml: the schema of config.example.yaml, filled
// in for the emulated site, each choice explained where it differs.
func configText(v configValues) string {
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	w(`# config.dev.yaml: the emulated site of ` + "`make demo`" + ` (internal/devenv), written on every start.
# Do not edit: the next start rewrites it (the emulators listen on new free ports each time).
# It is an ordinary configuration (schema: config.example.yaml): while the devworker runs,
# ` + "`worker --config <this file>`" + ` runs a second worker against the same site and Temporal server.
#
# The site: sql01 (the source, database Sales: four data files on two volumes) and sqlverify (the
# verification instance at the remote site) are SQL Server emulators over real TDS; bak01 and bak02 are
# directories under the state directory that the emulators reach through two UNC paths each (one per NIC),
# and that the worker reaches over SMB (a private smbd per server) when Samba is installed.
`)
	if v.temporal != "" {
		w("\ntemporal:\n  address: %s\n", v.temporal)
		if v.namespace != "" {
			w("  namespace: %s\n", v.namespace)
		}
	}
	w(`
manifest_keys:                    # the workers sign every manifest (README "Authenticated manifests")
  - id: dev
    key_file: %s   # generated on the first start

evidence:                         # every verified set, log proof and drill is recorded (README "Evidence ledger")
  signing_key_file: %s   # generated on the first start
  public_keys: [%s]
`, yq(v.manifestKeyFile), yq(v.evidenceKeyFile), yq(v.evidencePublic))
	w(`
defaults:
  stripes: 4                      # 2 per NIC path of each backup server
  compression: true
  buffer_count: 16                # 16 x 4MiB x 4 stripes = 256MiB of buffers, within memory_budget
  max_transfer_size: 4MiB
  sequence: table                 # DBBackup.Sequence inside Sales: numbers continue across demo runs
  # The emulated servers answer at once: short waits keep a demo of a lost host short too.
  sql_host_wait: {initial: 2s, max_interval: 30s, give_up_after: 10m}
  backup_server_wait: {initial: 2s, max_interval: 30s, give_up_after: 10m}
  copy_wait: {initial: 2s, max_interval: 30s}
  copy_deadline: 1h
  retention:
    keep_verified: 2              # per backup server; the newest verified set is never deleted
    delete_failed_after: 1h
  verify_name: "{db}_verify_{seq}"  # one restored copy per set: cycles started from the Web UI
                                    # while another runs do not restore over each other

sql_instances:
  - name: %s
    address: %s
    user: %s              # least privilege (README "Permissions"); sa only prepares the site
    password_file: %s   # generated on the first start
    encrypt: disable              # the emulator speaks plaintext TDS
    connect_timeout: 10s
%s  - name: %s
    address: %s
    user: %s
    password_file: %s
    encrypt: disable
    connect_timeout: 10s

backup_servers:
`, SourceInstance, v.source, ProductLogin, yq(v.passwordFile), fleetSelection(v.fleet), VerifyInstance, v.verify, ProductLogin, yq(v.passwordFile))
	for _, s := range BackupServers {
		w("  - name: %s\n    unc_paths:                    # as SQL Server sees the share, one per NIC\n", s)
		for _, p := range v.uncs[s] {
			w("      - %s\n", yq(p))
		}
		w("    location: %s   # how the worker reaches the same files\n", yq(v.locations[s]))
		if pf, ok := v.smbPasswords[s]; ok {
			w("    smb: {user: %s, password_file: %s}\n", smbUser, yq(pf))
		}
		if q := v.taskQueues[s]; q != "" {
			w("    task_queue: %s   # its copies run on the worker polling this queue\n", yq(q))
		}
		w(`    verify_instance: %s
    restore_data_dir: %s
    restore_log_dir: %s
`, VerifyInstance, yq(restorePrefix+`\data`), yq(restorePrefix+`\log`))
	}
	if v.vaultEndpoint != "" {
		w(`  - name: %s                  # an S3 server with Object Lock (versitygw), its bucket under the state directory
    kind: s3
    s3:
      endpoint: %s
      bucket: %s       # created with Object Lock
      prefix: %s
      access_key_id: %s
      secret_access_key_file: %s   # generated on the first start
      lock_mode: compliance       # nobody can delete a locked version before its lock ends
`, ObjectStore, v.vaultEndpoint, ObjectStoreBucket, ObjectStorePrefix, objectStoreUser, yq(v.vaultSecret))
	}
	w(`
databases:
  - name: %s
    instance: %s
    backup_servers: [%s]     # round robin: cycles alternate, the other server gets the remote copy
    sanity_checks:                # run against the restored copy on %s
      - name: orders-present
        query: SELECT COUNT_BIG(*) FROM dbo.Orders
        at_least: %d           # the rows of dbo.Orders in the source
      - name: order-lines-present
        query: SELECT COUNT_BIG(*) FROM dbo.OrderLines
        at_least: 1
      - name: regions-complete
        query: SELECT COUNT(*) FROM dbo.Regions
        equals: "%d"
      - name: activity-fresh      # dbo.SiteActivity is stamped by every start of the dev site
        query: SELECT MAX(LastWrite) FROM dbo.SiteActivity
        max_age: 26h
`, Database, SourceInstance, strings.Join(BackupServers, ", "), VerifyInstance, v.orders, RegionRows)
	if v.vaultEndpoint != "" {
		w("    immutable_copy: %s          # every verified set is copied there, locked, once it is verified\n", ObjectStore)
	}
	if v.logs {
		w(`    owns_backup_chain: true       # the product takes Sales's log backups: the log chain is its own
    log_backup: {every: 1m}       # BACKUP LOG once a minute; the development worker ticks faster (devworker --log-every)
    log_proof: standby            # a standby copy (%s_standby on %s) takes each log as it is copied
`, Database, VerifyInstance)
	}
	if v.drill {
		w(`    rto: 1h                       # a drill's measured time to recover above it turns status red
    drill:                        # a recovery drill: Recover under Sales_drill on %s, check it, drop it, record it
      every: 24h                  # the worker's Temporal Schedule; the demo starts one now, after the point-in-time proof
      within: 1h                  # to a random point of the last hour of the proven window
`, VerifyInstance)
	}
	return b.String()
}

// fleetSelection is what sql01's entry adds when the site holds the fleet's
// small databases (devworker --dev-fleet): the Fleet workflow then runs them all.
func fleetSelection(on bool) string {
	if !on {
		return ""
	}
	return fmt.Sprintf(`    max_concurrent: 2             # the Fleet backs up two of its databases at once
    databases: [USER_DATABASES]   # the Fleet's selection: Sales (its own entry below) and the small databases
    backup_servers: [%s]     # the rotation of the selected databases without an entry of their own
`, strings.Join(BackupServers, ", "))
}
