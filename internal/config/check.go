package config

import (
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

var (
	nameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$`)
	envRE  = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
)

// DefaultPolicy is what `defaults:` starts from (see the package doc).
func DefaultPolicy() Policy {
	return Policy{
		Stripes:          StripesAuto,
		Compression:      true,
		CopyOnly:         true,
		Sequence:         SequenceCatalog,
		MemoryBudget:     2 << 30,
		SQLHostWait:      Backoff{Initial: 15 * time.Second, MaxInterval: 5 * time.Minute, GiveUpAfter: 2 * time.Hour},
		BackupServerWait: Backoff{Initial: 15 * time.Second, MaxInterval: 5 * time.Minute, GiveUpAfter: 30 * time.Minute},
		CopyWait:         Retry{Initial: 5 * time.Second, MaxInterval: 2 * time.Minute},
		Retention:        Retention{KeepVerified: 2, DeleteFailedAfter: 72 * time.Hour},
		VerifyName:       "{db}_verify",
		RPO:              DefaultRPO,
		StandbyName:      "{db}_standby",
	}
}

// DefaultRPO is a nightly cycle plus two hours of slack: one late night is
// not yet an alarm, a missed night is.
const DefaultRPO = 26 * time.Hour

// Defaults of the other sections.
const (
	DefaultTemporalAddress = "127.0.0.1:7233"
	DefaultNamespace       = "default"
	DefaultTaskQueue       = "backupcycle"
	// DefaultEncrypt is TLS for the whole session with the certificate
	// checked, as Microsoft's own drivers default to since ODBC Driver 18
	// ("Major version differences",
	// https://learn.microsoft.com/sql/connect/odbc/major-version-differences).
	// It breaks nothing optional did not: go-mssqldb checks the
	// certificate of the login's TLS too, and every SQL Server since 2005
	// offers TLS (with a self-signed certificate when none is configured).
	DefaultEncrypt           = "mandatory"
	DefaultConnectTimeout    = 30 * time.Second
	DefaultSQLMaxConcurrent  = 1
	DefaultServerConcurrency = 2
	DefaultSMBPort           = 445
	// SQLServerDefaultMaxTransfer is what SQL Server uses for disk backups when
	// MAXTRANSFERSIZE is not given; the memory guard counts with it.
	SQLServerDefaultMaxTransfer Size = 1 << 20
	// MaxBufferCount bounds buffer_count far above any useful value (it would
	// need terabytes), so the memory arithmetic cannot overflow.
	MaxBufferCount = 1 << 20
)

// check validates the decoded configuration and fills in defaults.
func (d *decoder) check(c *Config) {
	d.checkTemporal(c)
	d.checkManifestKeys(c)
	d.checkEvidence(c)

	// Inherit first so every database is checked with the values it will use.
	d.inherit(reflect.ValueOf(&c.Defaults).Elem(), reflect.ValueOf(DefaultPolicy()), "defaults")
	for i := range c.Databases {
		d.inherit(reflect.ValueOf(&c.Databases[i].Policy).Elem(), reflect.ValueOf(c.Defaults), fmt.Sprintf("databases[%d]", i))
	}
	d.checkPolicy(&c.Defaults, "defaults", "defaults", func(string) bool { return true })

	instances := map[string]*SQLInstance{}
	for i := range c.SQLInstances {
		d.checkInstance(&c.SQLInstances[i], fmt.Sprintf("sql_instances[%d]", i), instances)
	}
	servers := map[string]*BackupServer{}
	for i := range c.BackupServers {
		d.checkServer(&c.BackupServers[i], fmt.Sprintf("backup_servers[%d]", i), servers, instances)
	}
	selects := false
	for i := range c.SQLInstances {
		inst := &c.SQLInstances[i]
		path := fmt.Sprintf("sql_instances[%d]", i)
		d.checkInstanceRotation(inst, path, servers)
		selects = selects || len(inst.Databases) > 0
	}
	d.checkImmutableCopies(c, servers)
	groups := d.checkGroups(c, instances, servers)
	if len(c.Databases) == 0 && !selects {
		d.errf(d.line("databases"), "databases", "no databases: add at least one under databases: (name, instance, backup_servers), or select them per instance with sql_instances[].databases (e.g. [USER_DATABASES]) and sql_instances[].backup_servers")
	}
	d.checkFleet(&c.Fleet)
	dbs := map[string]seenEntry{}
	verifyNames := map[string]string{} // verify instance + name -> database
	for i := range c.Databases {
		d.checkDatabase(c, &c.Databases[i], fmt.Sprintf("databases[%d]", i), instances, groups, servers, dbs, verifyNames)
	}
	d.checkChains(c)
	d.checkLogs(c)
	d.checkDrills(c)
	d.checkDiffs(c)
	d.checkEncryptions(c)
	d.checkPlatforms(c)
	d.checkVerifyNotSource(c)
}

// checkVerifyNotSource refuses a verification instance at the address of a
// source instance (the same SQL Server under a second name): its copies,
// replaced and dropped every night, would live beside production databases.
func (d *decoder) checkVerifyNotSource(c *Config) {
	sources := map[string]bool{}
	for _, db := range c.Databases {
		sources[db.Instance] = true
	}
	for _, in := range c.SQLInstances {
		if len(in.Databases) > 0 {
			sources[in.Name] = true
		}
	}
	for i, b := range c.BackupServers {
		v, ok := c.SQLInstance(b.VerifyInstance)
		if b.VerifyInstance == "" || !ok || sources[v.Name] { // a source as verify_instance: checkCopyTarget
			continue
		}
		for _, in := range c.SQLInstances {
			if !sources[in.Name] || in.Name == v.Name || !sameAddress(in.Address, v.Address) {
				continue
			}
			path := fmt.Sprintf("backup_servers[%d]", i)
			kp := join(path, "verify_instance")
			d.errf(d.line(kp), kp, "%s: verify_instance %s is at %s, the address of source instance %s: a valid backup is restored on another SQL Server, at the remote site; point verify_instance at that server",
				labelled(path, b.Name), v.Name, v.Address, in.Name)
			break
		}
	}
}

// sameAddress reports whether two host:port addresses name one endpoint:
// host names compared case-insensitively without a trailing dot, IP
// addresses in their canonical form, every loopback name alike, ports as
// numbers. (Names are not resolved: loading a configuration reaches no
// server.)
func sameAddress(a, b string) bool {
	norm := func(addr string) (string, int, bool) {
		host, port, err := net.SplitHostPort(addr)
		if err != nil {
			return "", 0, false
		}
		p, err := strconv.Atoi(port)
		if err != nil {
			return "", 0, false
		}
		host = strings.TrimSuffix(strings.ToLower(host), ".")
		if LoopbackHost(host) {
			return "localhost", p, true
		}
		if ip := net.ParseIP(host); ip != nil {
			return ip.String(), p, true
		}
		return host, p, true
	}
	ha, pa, oka := norm(a)
	hb, pb, okb := norm(b)
	return oka && okb && ha == hb && pa == pb
}

// LoopbackHost reports whether host (a name or IP address) is this
// machine's loopback interface, where traffic crosses no network.
func LoopbackHost(host string) bool {
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	if ip := net.ParseIP(host); ip != nil {
		return ip.IsLoopback()
	}
	return host == "localhost" || strings.HasSuffix(host, ".localhost") // RFC 6761: always loopback
}

// loopbackAddr is LoopbackHost of a host:port address.
func loopbackAddr(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	return err == nil && LoopbackHost(host)
}

func (d *decoder) checkTemporal(c *Config) {
	t := &c.Temporal
	if t.Address == "" {
		t.Address = DefaultTemporalAddress
	} else {
		d.checkHostPort(t.Address, "temporal.address", "the Temporal frontend, e.g. temporal:7233")
	}
	if t.Namespace == "" {
		t.Namespace = DefaultNamespace
	}
	if t.TaskQueue == "" {
		t.TaskQueue = DefaultTaskQueue
	} else if strings.ContainsAny(t.TaskQueue, " \t\n") {
		d.errf(d.line("temporal.task_queue"), "temporal.task_queue", "temporal.task_queue %q must not contain spaces", t.TaskQueue)
	}
	if t.APIKeyEnv != "" {
		d.checkEnvName(t.APIKeyEnv, "temporal.api_key_env", "temporal", "api_key_env", "API key")
	}
	// An API key makes the SDK use TLS by itself. A plaintext cluster on a
	// private network is common, so this warns rather than refuses.
	if t.TLS == nil && t.APIKeyEnv == "" && !loopbackAddr(t.Address) {
		d.warnf(d.line("temporal.address"), "temporal.address", "temporal: address %s is not a loopback address and temporal.tls is not set: "+
			"the workflows' inputs and results (database, instance and server names, paths, errors) and every call to the cluster cross the network in clear, "+
			"and nothing proves the frontend is the cluster: set temporal.tls (ca_file, and cert_file and key_file where the cluster requires client certificates)", t.Address)
	}
	if t.TLS != nil {
		if (t.TLS.CertFile == "") != (t.TLS.KeyFile == "") {
			d.errf(d.line("temporal.tls"), "temporal.tls", "temporal.tls: cert_file and key_file go together (mTLS client certificate): set both or neither")
		}
		t.TLS.CAFile = d.relPath(t.TLS.CAFile)
		t.TLS.CertFile = d.relPath(t.TLS.CertFile)
		t.TLS.KeyFile = d.relPath(t.TLS.KeyFile)
	}
}

// relPath makes a relative path relative to the config file's directory.
func (d *decoder) relPath(p string) string {
	// A path in systemd's credentials directory is resolved where the
	// file is read (expandCredentials).
	if p == "" || filepath.IsAbs(p) || strings.HasPrefix(p, CredentialsPrefix) {
		return p
	}
	return filepath.Join(filepath.Dir(d.file), p)
}

func (d *decoder) checkHostPort(addr, path, example string) {
	if strings.Contains(addr, "://") || strings.Contains(addr, "@") {
		d.errf(d.line(path), path, "%s %q must be host:port only (%s); credentials go in user and password_env/password_file", path, addr, example)
		return
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil || host == "" {
		d.errf(d.line(path), path, "%s %q is not host:port (%s)", path, addr, example)
		return
	}
	if p, err := strconv.Atoi(port); err != nil || p < 1 || p > 65535 {
		d.errf(d.line(path), path, "%s %q: port %q is not a number from 1 to 65535", path, addr, port)
	}
}

// pasted is what a message about a reference that looks like the secret
// (what: "password", "API key") says after the key. The value itself is
// never echoed: it is in the file already, and must not reach a log too.
func pasted(what string) string {
	return "it looks like the " + what + " itself: if it is, take it out of this file, change the " + what +
		" and put the new one where the reference points"
}

// checkEnvName checks the name of an environment variable holding a secret
// (key, in owner, at path; what the secret is). It does not echo a bad name: it may be the
// secret, pasted by mistake.
func (d *decoder) checkEnvName(name, path, owner, key, what string) {
	if !envRE.MatchString(name) {
		d.errf(d.line(path), path, "%s: %s is not an environment variable name (letters, digits, _; e.g. SQL01_PASSWORD): %s", owner, key, pasted(what))
	}
}

// checkSecret checks a password reference at path (the mapping holding it).
// A password_file is resolved against the configuration's directory; a
// bare name (no directory in it) that names no file there is refused as a
// password pasted in its place, since every error about the file would
// quote it. A missing file with a directory in its path is not refused:
// it may be mounted only where the worker runs (/run/secrets/...).
func (d *decoder) checkSecret(r *SecretRef, path, owner string) {
	d.checkSecretRef(&r.Env, &r.File, path, owner, "password_env", "password_file", "password")
}

// checkSecretRef is checkSecret of any secret given by reference: an
// environment variable (*env, key envKey) or a file (*file, key fileKey,
// made relative to the configuration), what naming the secret.
func (d *decoder) checkSecretRef(env, file *string, path, owner, envKey, fileKey, what string) {
	switch {
	case *env != "" && *file != "":
		d.errf(d.line(join(path, fileKey)), path, "%s: %s and %s are both set: keep one", owner, envKey, fileKey)
	case *env == "" && *file == "":
		if d.inline[path] || d.reported[join(path, envKey)] || d.reported[join(path, fileKey)] {
			return // the inline or misspelt key is the error to fix
		}
		d.errf(d.line(path), path, "missing required key %q or %q in %s: name the environment variable or file that holds the %s", envKey, fileKey, owner, what)
	case *env != "":
		d.checkEnvName(*env, join(path, envKey), owner, envKey, what)
	default:
		bare := !strings.ContainsAny(*file, `/\`)
		*file = d.relPath(*file)
		if _, err := os.Lstat(*file); bare && err != nil {
			fp := join(path, fileKey)
			d.errf(d.line(fp), fp, "%s: %s names no file next to the configuration and has no directory in it: %s", owner, fileKey, pasted(what))
		}
	}
}

func (d *decoder) required(value, path, key, owner, what string) bool {
	if strings.TrimSpace(value) == "" {
		d.errf(d.line(join(path, key)), join(path, key), "missing required key %q in %s (%s)", key, owner, what)
		return false
	}
	return true
}

// seen is the lower-cased name -> name and line map of a section, for
// duplicate names.
func (d *decoder) seen(section string) map[string]seenName {
	if d.names == nil {
		d.names = map[string]map[string]seenName{}
	}
	if d.names[section] == nil {
		d.names[section] = map[string]seenName{}
	}
	return d.names[section]
}

func (d *decoder) checkName(name, path, owner, section string, seen map[string]seenName) bool {
	if !d.required(name, path, "name", owner, "a short name other sections refer to") {
		return false
	}
	if !nameRE.MatchString(name) {
		d.errf(d.line(join(path, "name")), join(path, "name"), "%s: name %q: use letters, digits, '.', '_' or '-' (at most 63)", owner, name)
		return false
	}
	// Keys are unique ignoring case: instance keys are part of file names,
	// which a Windows or Samba share matches case-insensitively (SQL01 and
	// sql01 would share files there).
	key := strings.ToLower(name)
	if first, dup := seen[key]; dup {
		if first.name == name {
			d.errf(d.line(join(path, "name")), join(path, "name"), "%s: name %q is already used in %s at line %d: names must be unique", owner, name, section, first.line)
		} else {
			d.errf(d.line(join(path, "name")), join(path, "name"), "%s: name %q differs only in case from %q at line %d in %s: names must be unique ignoring case (file names on a Windows or Samba share are)", owner, name, first.name, first.line, section)
		}
		return false
	}
	seen[key] = seenName{name, d.line(join(path, "name"))}
	return true
}

// seenName is a name met earlier in a section and its line.
type seenName struct {
	name string
	line int
}

func labelled(path, name string) string {
	if name == "" {
		return path
	}
	return fmt.Sprintf("%s (%s)", path, name)
}

func (d *decoder) checkInstance(s *SQLInstance, path string, all map[string]*SQLInstance) {
	owner := labelled(path, s.Name)
	if d.checkName(s.Name, path, owner, "sql_instances", d.seen("sql_instances")) {
		all[s.Name] = s
	}
	if d.required(s.Address, path, "address", owner, "host:port of the SQL Server, e.g. sql01:1433") {
		d.checkHostPort(s.Address, join(path, "address"), "e.g. sql01:1433")
	}
	if d.required(s.User, path, "user", owner, `the SQL login, or DOMAIN\user for a Windows login`) {
		d.checkLoginName(s.User, join(path, "user"), owner)
	}
	d.checkSecret(&s.Password, path, owner)
	d.checkTLS(s, path, owner)
	if d.given(join(path, "connect_timeout")) {
		if s.ConnectTimeout <= 0 {
			d.errf(d.line(join(path, "connect_timeout")), join(path, "connect_timeout"), "%s: connect_timeout must be positive, e.g. 30s", owner)
		}
	} else {
		s.ConnectTimeout = DefaultConnectTimeout
	}
	s.MaxConcurrent = d.positive(s.MaxConcurrent, join(path, "max_concurrent"), owner, DefaultSQLMaxConcurrent)
	d.checkSelection(s.Databases, join(path, "databases"), owner)
	switch p := strings.ToLower(s.Platform); p {
	case "", PlatformWindows, PlatformLinux:
		s.Platform = p
	default:
		pp := join(path, "platform")
		d.errf(d.line(pp), pp, "%s: platform %q: use windows or linux, or leave it out (detected from sys.dm_os_host_info)", owner, s.Platform)
	}
}

// checkInstanceRotation checks an instance's backup_servers / copy_to, the
// rotation of the databases its selection picks without an entry of their
// own.
func (d *decoder) checkInstanceRotation(s *SQLInstance, path string, servers map[string]*BackupServer) {
	owner := labelled(path, s.Name)
	rot, cp := join(path, "backup_servers"), join(path, "copy_to")
	if len(s.BackupServers) == 0 {
		if s.CopyTo != "" {
			d.errf(d.line(cp), cp, "%s: copy_to without backup_servers: list the rotation in backup_servers too", owner)
		}
		return
	}
	for _, t := range d.checkRotation(s.BackupServers, s.CopyTo, rot, cp, owner, servers) {
		d.checkCopyTarget(t, servers[t], s.Name, d.line(rot), rot, owner)
	}
}

// checkRotation checks a rotation (backup_servers at rot) and its copy_to
// (at cp): every server defined and listed once, a copy target outside the
// rotation, a second server when there is no copy_to. It returns the
// servers that receive the remote copies.
func (d *decoder) checkRotation(rotation []string, copyTo, rot, cp, owner string, servers map[string]*BackupServer) []string {
	inRot := map[string]bool{}
	for i, s := range rotation {
		ip := fmt.Sprintf("%s[%d]", rot, i)
		if b, ok := servers[s]; !ok {
			d.errf(d.line(ip), ip, "%s: backup server %q is not defined in backup_servers (defined: %s)", owner, s, keys(servers))
		} else if b.IsObjectStore() {
			d.errf(d.line(ip), ip, "%s: backup server %q is an object store (kind: s3): SQL Server cannot back up to it; it takes the immutable copies of verified sets: name it in immutable_copy instead", owner, s)
		}
		if inRot[s] {
			d.errf(d.line(ip), ip, "%s: backup server %q is listed twice in backup_servers", owner, s)
		}
		inRot[s] = true
	}
	switch {
	case copyTo != "" && servers[copyTo] == nil:
		d.errf(d.line(cp), cp, "%s: copy_to %q is not defined in backup_servers (defined: %s)", owner, copyTo, keys(servers))
	case copyTo != "" && servers[copyTo].IsObjectStore():
		d.errf(d.line(cp), cp, "%s: copy_to %q is an object store (kind: s3): the remote copy is restored from a share; name it in immutable_copy to keep a locked copy of every verified set there", owner, copyTo)
	case copyTo != "" && inRot[copyTo]:
		d.errf(d.line(cp), cp, "%s: copy_to %q is also in backup_servers, so a cycle would copy %s onto itself: remove it from the rotation, or leave copy_to empty to copy to the next server in the rotation", owner, copyTo, copyTo)
	case copyTo != "":
		return []string{copyTo}
	case len(rotation) == 1:
		d.errf(d.line(rot), rot, "%s: a single backup server and no copy_to: the remote copy needs another server: set copy_to or list two servers in backup_servers", owner)
	default:
		return rotation
	}
	return nil
}

// checkCopyTarget checks that backup server t (nil: not defined, reported
// already) can verify the copies of source: it has a verification instance,
// and not the source itself. It reports at line under path.
func (d *decoder) checkCopyTarget(t string, s *BackupServer, source string, line int, path, owner string) bool {
	switch {
	case s == nil:
		return false
	case s.VerifyInstance == "":
		d.errf(line, path, "%s: backup server %q receives the remote copy but has no verify_instance: set verify_instance, restore_data_dir and restore_log_dir on %s", owner, t, t)
		return false
	case s.VerifyInstance == source:
		d.errf(line, path, "%s: backup server %q verifies on %s, the source instance itself: a valid backup is restored at the remote site, so use another verify_instance", owner, t, source)
		return false
	}
	return true
}

// Fleet defaults.
const (
	DefaultFleetMaxConcurrent = 4
	DefaultFleetWindow        = 20 * time.Hour
)

func (d *decoder) checkFleet(f *Fleet) {
	f.MaxConcurrent = d.positive(f.MaxConcurrent, "fleet.max_concurrent", "fleet", DefaultFleetMaxConcurrent)
	if d.given("fleet.window") {
		if f.Window <= 0 {
			d.errf(d.line("fleet.window"), "fleet.window", "fleet: window must be positive, e.g. 8h (how long after its start a fleet run may start cycles)")
		}
	} else {
		f.Window = DefaultFleetWindow
	}
}

// checkLoginName accepts a SQL login or DOMAIN\user (NTLM): one backslash
// with a name on each side.
func (d *decoder) checkLoginName(user, path, owner string) {
	if !strings.Contains(user, `\`) {
		return
	}
	domain, name, _ := strings.Cut(user, `\`)
	if domain == "" || name == "" || strings.Contains(name, `\`) {
		d.errf(d.line(path), path, `%s: user %q: a Windows login is written DOMAIN\user (one backslash, e.g. CORP\svc-backup)`, owner, user)
	}
}

// Encrypt modes (go-mssqldb's encrypt values) and the older spellings
// accepted for them.
var encryptModes = map[string]string{
	"strict": "strict", "mandatory": "mandatory", "optional": "optional", "disable": "disable",
	"true": "mandatory", "false": "optional",
}

// checkTLS validates encrypt, ca_file, trust_server_certificate and
// hostname_in_certificate together.
func (d *decoder) checkTLS(s *SQLInstance, path, owner string) {
	ep := join(path, "encrypt")
	if s.Encrypt == "" {
		s.Encrypt = DefaultEncrypt
	} else if mode, ok := encryptModes[strings.ToLower(s.Encrypt)]; ok {
		s.Encrypt = mode
	} else {
		d.errf(d.line(ep), ep, "%s: encrypt %q: use strict (TDS 8.0, TLS first), mandatory (whole session), optional (login at least) or disable", owner, s.Encrypt)
		return
	}
	tlsSet := s.CAFile != "" || s.TrustServerCertificate || s.HostNameInCertificate != ""
	switch {
	case s.Encrypt == "disable" && tlsSet:
		d.errf(d.line(ep), ep, "%s: encrypt: disable sends no TLS, so ca_file, trust_server_certificate and hostname_in_certificate do nothing: remove them or choose another encrypt mode", owner)
	case s.Encrypt == "strict" && s.TrustServerCertificate:
		tp := join(path, "trust_server_certificate")
		d.errf(d.line(tp), tp, "%s: encrypt: strict always verifies the server's certificate: remove trust_server_certificate and set ca_file to the CA that signed it", owner)
	case s.CAFile != "" && s.TrustServerCertificate:
		tp := join(path, "trust_server_certificate")
		d.errf(d.line(tp), tp, "%s: trust_server_certificate: true skips the check ca_file is for: keep one of them", owner)
	}
	d.warnTLS(s, path, owner)
	if s.CAFile == "" {
		return
	}
	cp := join(path, "ca_file")
	s.CAFile = d.relPath(s.CAFile)
	data, err := os.ReadFile(s.CAFile)
	if err != nil {
		d.errf(d.line(cp), cp, "%s: ca_file: %v", owner, err)
		return
	}
	if n, err := pemCertificates(data); err != nil || n == 0 {
		why := "no PEM certificate (-----BEGIN CERTIFICATE-----) in it"
		if err != nil {
			why = err.Error()
		}
		d.errf(d.line(cp), cp, "%s: ca_file %s: %s: give the PEM file of the CA that signed SQL Server's certificate", owner, s.CAFile, why)
	}
}

// warnTLS warns of the settings that let an instance's traffic be read or
// its server be impersonated, unless the address is a loopback one, where
// the traffic crosses no network.
func (d *decoder) warnTLS(s *SQLInstance, path, owner string) {
	if loopbackAddr(s.Address) {
		return
	}
	ep, tp := join(path, "encrypt"), join(path, "trust_server_certificate")
	switch s.Encrypt {
	case "disable":
		d.warnf(d.line(ep), ep, "%s: encrypt: disable sends the login's password and every statement and result in clear to %s: "+
			"leave encrypt out (mandatory: TLS for the whole session, the certificate checked) or use strict", owner, s.Address)
	case "optional":
		d.warnf(d.line(ep), ep, "%s: encrypt: optional encrypts the login only: the statements and their results (database names, paths, "+
			"the sanity checks' values) cross the network to %s in clear: leave encrypt out (mandatory) or use strict", owner, s.Address)
	}
	if s.TrustServerCertificate {
		d.warnf(d.line(tp), tp, "%s: trust_server_certificate: true accepts any certificate, so whoever can intercept the traffic to %s can pose as "+
			"the server and read the login's password: set ca_file to the CA that signed the server's certificate (a self-signed certificate "+
			"is its own CA) and remove trust_server_certificate", owner, s.Address)
	}
}

// pemCertificates counts the certificates of a PEM file, failing on the
// first CERTIFICATE block x509 cannot parse.
func pemCertificates(data []byte) (int, error) {
	n := 0
	for {
		var b *pem.Block
		b, data = pem.Decode(data)
		if b == nil {
			return n, nil
		}
		if b.Type != "CERTIFICATE" {
			continue
		}
		if _, err := x509.ParseCertificate(b.Bytes); err != nil {
			return n, fmt.Errorf("certificate %d does not parse: %w", n+1, err)
		}
		n++
	}
}

func (d *decoder) positive(v int, path, owner string, def int) int {
	if !d.given(path) {
		return def
	}
	if v < 1 {
		d.errf(d.line(path), path, "%s: %s must be at least 1", owner, path[strings.LastIndex(path, ".")+1:])
	}
	return v
}

func keys[T any](m map[string]*T) string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	if len(ks) == 0 {
		return "none"
	}
	return strings.Join(ks, ", ")
}

func (d *decoder) checkDatabase(c *Config, db *Database, path string, instances map[string]*SQLInstance, groups map[string]*AvailabilityGroup,
	servers map[string]*BackupServer, seen map[string]seenEntry, verifyNames map[string]string) {
	owner := labelled(path, db.Name)
	if d.required(db.Name, path, "name", owner, "the database name on the instance") {
		switch {
		case utf16Len(db.Name) > 128:
			d.errf(d.line(join(path, "name")), join(path, "name"), "%s: name is %d characters (UTF-16, as SQL Server counts), longer than SQL Server's limit of 128", owner, utf16Len(db.Name))
		case strings.ContainsRune(db.Name, 0) || !utf8.ValidString(db.Name):
			d.errf(d.line(join(path, "name")), join(path, "name"), "%s: name contains a NUL byte or invalid UTF-8", owner)
		default:
			if err := CheckDatabaseName(db.Name); err != nil {
				d.errf(d.line(join(path, "name")), join(path, "name"), "%s: %v", owner, err)
			}
		}
	}
	sources := []string{db.Instance}
	if d.required(db.Instance, path, "instance", owner, "the sql_instances (or availability_groups) name of the source") {
		_, isInstance := instances[db.Instance]
		g, isGroup := groups[db.Instance]
		switch {
		case isGroup:
			sources, db.Aliases = g.Replicas, g.Former()
		case !isInstance:
			d.errf(d.line(join(path, "instance")), join(path, "instance"), "%s: instance %q is not defined in sql_instances (defined: %s)", owner, db.Instance, keys(instances))
		}
	}
	// One entry per database ignoring case: on a case-insensitive instance
	// DBA and dba are one database, which two entries would back up twice
	// at once under two workflow ids. An entry on an availability group
	// and one on its replica (or on two of its replicas) name one
	// availability database too.
	key := sourceKey(groups, c, db.Instance) + "\x00" + strings.ToLower(db.Name)
	if first, dup := seen[key]; dup && db.Name != "" && first.instance != db.Instance {
		d.errf(d.line(join(path, "name")), join(path, "name"), "%s: database %q on %s and %s %q on %s name one availability database of group %s if it is one: keep one entry, with instance: %s",
			owner, db.Name, db.Instance, first.path, first.name, first.instance, sourceKey(groups, c, db.Instance), sourceKey(groups, c, db.Instance))
	} else if dup && db.Name != "" {
		if first.name == db.Name {
			d.errf(d.line(join(path, "name")), join(path, "name"), "%s: database %q on %s is already configured in %s at line %d", owner, db.Name, db.Instance, first.path, first.line)
		} else {
			d.errf(d.line(join(path, "name")), join(path, "name"), "%s: database %q on %s differs only in case from %s %q at line %d: SQL Server compares names case-insensitively by default, so both entries would name one database; keep one", owner, db.Name, db.Instance, first.path, first.name, first.line)
		}
	} else {
		seen[key] = seenEntry{path: path, name: db.Name, instance: db.Instance, line: d.line(join(path, "name"))}
	}

	rot := join(path, "backup_servers")
	if len(db.BackupServers) == 0 {
		d.errf(d.line(rot), rot, "missing required key \"backup_servers\" in %s (the backup servers in rotation order, e.g. [bak01, bak02])", owner)
	}
	targets := d.checkRotation(db.BackupServers, db.CopyTo, rot, join(path, "copy_to"), owner, servers)
	for _, t := range targets {
		tp := fmt.Sprintf("%s.copy_target[%s]", path, t)
		ok := true
		for _, src := range sources {
			ok = ok && d.checkCopyTarget(t, servers[t], src, d.line(path), tp, owner)
		}
		if !ok {
			continue
		}
		s := servers[t]
		vn := db.VerifyDatabaseName(0)
		k := s.VerifyInstance + "\x00" + strings.ToLower(vn)
		if other, dup := verifyNames[k]; dup && other != owner {
			// Backup files are keyed by (instance, database) and never
			// collide; only the restored copies on a shared verification
			// instance would.
			d.errf(d.line(path), tp, "%s: its verification copy %q on %s would collide with %s's: set verify_name (e.g. \"{instance}_{db}_verify\")", owner, vn, s.VerifyInstance, other)
		}
		verifyNames[k] = owner
		// So would their standby copies (and the scratch copies named
		// after them) when both prove their log chains there.
		if db.LogBackups() && db.ProofMode() != "" {
			sn := db.StandbyDatabaseName()
			sk := "standby\x00" + s.VerifyInstance + "\x00" + strings.ToLower(sn)
			if other, dup := verifyNames[sk]; dup && other != owner {
				d.errf(d.line(path), tp, "%s: its standby copy %q on %s would collide with %s's: set standby_name (e.g. \"{instance}_{db}_standby\")", owner, sn, s.VerifyInstance, other)
			}
			verifyNames[sk] = owner
		}
	}

	d.checkPolicy(&db.Policy, path, owner, func(k string) bool { return d.given(join(path, k)) })
	// A fixed name in an entry (as the long-name fix suggests) must still
	// not be the database's own.
	if kp := join(path, "verify_name"); db.Name != "" && d.given(kp) && !d.reported[kp] && !strings.Contains(db.VerifyName, "{seq}") &&
		strings.EqualFold(strings.TrimRight(db.VerifyDatabaseName(0), " "), strings.TrimRight(db.Name, " ")) {
		d.errf(d.line(kp), kp, "%s: verify_name %q names the copy like the database itself: use a name with a fixed prefix or suffix, e.g. \"{db}_verify\"", owner, db.VerifyName)
	}
	d.checkNames(db, path, owner, servers, targets, sources)
	d.checkMemory(&db.Policy, path, owner)
	d.checkSanity(db, path, owner)
}

// seenEntry is a databases: entry met earlier: its path, name, instance
// and line.
type seenEntry struct {
	path, name, instance string
	line                 int
}

// CheckDatabaseName refuses a database name with a leading or trailing
// blank: SQL Server ignores trailing blanks when it compares names ("= (String
// Comparison or Assignment)",
// https://learn.microsoft.com/en-us/sql/t-sql/language-elements/string-comparison-assignment),
// so "Sales " names the database Sales while every check made on the name
// as written (a selection's exclusion, the workflow id, the databases:
// entry) would take it for another; a leading blank is as surely a typo.
func CheckDatabaseName(name string) error {
	if name != strings.TrimFunc(name, unicode.IsSpace) {
		return fmt.Errorf("database name %q has a leading or trailing blank: SQL Server ignores trailing blanks when it compares names, so it would not be told apart from %q; write the name without them", name, strings.TrimFunc(name, unicode.IsSpace))
	}
	return nil
}

// inherit copies every key of src into dst that the file did not set at path,
// nested sections key by key, except a section inherited whole (one whose
// keys mean something only together, such as encryption:).
func (d *decoder) inherit(dst, src reflect.Value, path string) {
	fs, _ := fields(dst.Type())
	for name, f := range fs {
		kp := join(path, name)
		dv, sv := dst.FieldByIndex(f.index), src.FieldByIndex(f.index)
		if _, whole := dv.Interface().(interface{ inheritWhole() }); dv.Kind() == reflect.Struct && d.given(kp) && !whole {
			d.inherit(dv, sv, kp)
			continue
		}
		if !d.given(kp) {
			dv.Set(sv)
		}
	}
}
