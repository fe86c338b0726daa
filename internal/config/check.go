package config

import (
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net"
	"net/url"
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

	"github.com/backupcycle/backupcycle/internal/plan"
	"github.com/backupcycle/backupcycle/internal/tsql"
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
	if p == "" || filepath.IsAbs(p) {
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

// checkPolicy checks the policy keys selected by only; values a database
// inherits are checked once, under defaults.
func (d *decoder) checkPolicy(p *Policy, path, owner string, only func(key string) bool) {
	at := func(k string) (int, string) { return d.line(join(path, k)), join(path, k) }
	if only("max_transfer_size") && p.MaxTransferSize != 0 {
		l, kp := at("max_transfer_size")
		m := int64(p.MaxTransferSize)
		switch {
		case m%(64<<10) != 0:
			hint := ""
			if m%1000000 == 0 {
				hint = fmt.Sprintf(" (did you mean %dMiB?)", m/1000000)
			}
			d.errf(l, kp, "%s: max_transfer_size %d bytes is not a multiple of 64KiB%s: SQL Server accepts 64KiB..4MiB in 64KiB steps", owner, m, hint)
		case m > 4<<20:
			d.errf(l, kp, "%s: max_transfer_size %s is above 4MiB, SQL Server's maximum", owner, p.MaxTransferSize)
		}
	}
	if only("block_size") && p.BlockSize != 0 {
		l, kp := at("block_size")
		b := int64(p.BlockSize)
		if b < 512 || b > 65536 || b&(b-1) != 0 {
			d.errf(l, kp, "%s: block_size %d is not one of 512, 1024, 2048, 4096, 8192, 16384, 32768, 65536", owner, b)
		}
	}
	if only("buffer_count") && (p.BufferCount < 0 || p.BufferCount > MaxBufferCount) {
		l, kp := at("buffer_count")
		d.errf(l, kp, "%s: buffer_count %d is out of range: use 1..%d, or 0 / leave it out to let SQL Server choose", owner, p.BufferCount, MaxBufferCount)
	}
	if only("sequence") && p.Sequence != SequenceCatalog && p.Sequence != SequenceTable && p.Sequence != SequenceUTC {
		l, kp := at("sequence")
		d.errf(l, kp, "%s: sequence %q: use catalog (kept beside the manifests), table (DBBackup.Sequence in the database) or utc", owner, p.Sequence)
	}
	if only("memory_budget") && p.MemoryBudget <= 0 {
		l, kp := at("memory_budget")
		d.errf(l, kp, "%s: memory_budget must be positive, e.g. 2GiB", owner)
	}
	d.checkBackoff(p.SQLHostWait, path, owner, "sql_host_wait", only)
	d.checkBackoff(p.BackupServerWait, path, owner, "backup_server_wait", only)
	d.checkBackoff(Backoff{Initial: p.CopyWait.Initial, MaxInterval: p.CopyWait.MaxInterval, GiveUpAfter: p.CopyWait.MaxInterval}, path, owner, "copy_wait", only)
	d.checkTimeouts(p, path, owner, only)
	if only("retention") {
		if p.Retention.KeepVerified < 1 && (path == "defaults" || d.given(join(path, "retention.keep_verified"))) {
			l, kp := at("retention.keep_verified")
			d.errf(l, kp, "%s: retention.keep_verified must be at least 1: the newest verified set is always kept", owner)
		}
		if p.Retention.DeleteFailedAfter <= 0 && (path == "defaults" || d.given(join(path, "retention.delete_failed_after"))) {
			l, kp := at("retention.delete_failed_after")
			d.errf(l, kp, "%s: retention.delete_failed_after must be positive, e.g. 72h or 3d", owner)
		}
	}
	if only("rpo") && p.RPO <= 0 {
		l, kp := at("rpo")
		d.errf(l, kp, "%s: rpo must be positive, e.g. 26h for a nightly backup", owner)
	}
	if only("rto") && p.RTO < 0 {
		l, kp := at("rto")
		d.errf(l, kp, "%s: rto must not be negative (0 = no objective), e.g. 4h", owner)
	}
	if only("verify_name") {
		l, kp := at("verify_name")
		rest := strings.NewReplacer("{db}", "", "{instance}", "", "{seq}", "").Replace(p.VerifyName)
		switch {
		case p.VerifyName == "" || strings.TrimSpace(rest) == "" && !strings.Contains(p.VerifyName, "{db}"):
			d.errf(l, kp, "%s: verify_name %q gives no name: use e.g. \"{db}_verify\"", owner, p.VerifyName)
		case strings.ContainsAny(rest, "{}"):
			d.errf(l, kp, "%s: verify_name %q: only {db}, {instance} and {seq} are replaced", owner, p.VerifyName)
		case strings.ContainsRune(rest, 0):
			d.errf(l, kp, "%s: verify_name contains a NUL byte", owner)
		case strings.TrimSpace(rest) == "":
			// Placeholders alone name the copy like a database it is not:
			// "{db}" is the source database's own name, which the
			// verification instance may host (SQL Server also ignores
			// trailing blanks when it compares names).
			d.errf(l, kp, "%s: verify_name %q has no fixed prefix or suffix, so the copy could be named like a production database: add one, e.g. \"{db}_verify\"", owner, p.VerifyName)
		case path == "defaults" && !strings.Contains(p.VerifyName, "{db}"):
			d.errf(l, kp, "%s: verify_name %q does not contain {db}, so every database's copy would get one name: use e.g. \"{db}_verify\" (a fixed name belongs in one database's entry)", owner, p.VerifyName)
		}
	}
}

func (d *decoder) checkBackoff(b Backoff, path, owner, key string, only func(string) bool) {
	if !only(key) {
		return
	}
	kp := join(path, key)
	switch {
	case b.Initial <= 0:
		d.errf(d.line(kp+".initial"), kp, "%s: %s.initial must be positive, e.g. 15s", owner, key)
	case b.MaxInterval < b.Initial:
		d.errf(d.line(kp+".max_interval"), kp, "%s: %s.max_interval %s is shorter than initial %s", owner, key, b.MaxInterval, b.Initial)
	case b.GiveUpAfter < b.Initial:
		d.errf(d.line(kp+".give_up_after"), kp, "%s: %s.give_up_after %s is shorter than initial %s", owner, key, b.GiveUpAfter, b.Initial)
	}
}

// checkMemory is seed 004's guard: the BACKUP's buffer memory, BUFFERCOUNT x
// MAXTRANSFERSIZE (Policy.BackupMemory), must fit the memory budget, or SQL
// Server fails the backup with "insufficient system memory". With stripes
// auto the planner stays within the budget (MaxStripesInBudget); one stripe
// must fit already.
func (d *decoder) checkMemory(p *Policy, path, owner string) {
	if p.MemoryBudget <= 0 { // not set (or not parsed: reported already)
		return
	}
	stripes := int(p.Stripes)
	if p.Stripes == StripesAuto {
		stripes = 1
	}
	need := p.BackupMemory(stripes)
	if need <= int64(p.MemoryBudget) {
		return
	}
	src := func(k string) string {
		if d.given(join(path, k)) {
			return ""
		}
		if d.given(join("defaults", k)) {
			return " (from defaults)"
		}
		return " (built-in default)"
	}
	line := d.line(path) // the first of the keys this database sets, else the database
	for _, k := range []string{"buffer_count", "max_transfer_size", "stripes", "memory_budget"} {
		if l := d.line(join(path, k)); d.given(join(path, k)) && (line == d.line(path) || l < line) {
			line = l
		}
	}
	bc := fmt.Sprintf("BUFFERCOUNT %d%s", p.BufferCount, src("buffer_count"))
	if p.BufferCount <= 0 {
		bc = fmt.Sprintf("SQL Server's default BUFFERCOUNT for %d stripes (%d)", stripes, plan.DefaultBufferCount(stripes, 1))
	}
	d.errf(line, join(path, "buffer_count"),
		"%s: %s x MAXTRANSFERSIZE %s%s = %s exceeds memory_budget %s%s (seed 004: SQL Server would fail with \"insufficient system memory\"): lower buffer_count or max_transfer_size, or raise memory_budget",
		owner, bc, p.effectiveMaxTransfer(), src("max_transfer_size"), Size(need), p.MemoryBudget, src("memory_budget"))
}

func (d *decoder) checkSanity(db *Database, path, owner string) {
	names := map[string]bool{}
	for i, sc := range db.SanityChecks {
		sp := fmt.Sprintf("%s.sanity_checks[%d]", path, i)
		so := labelled(owner+".sanity_checks["+strconv.Itoa(i)+"]", sc.Name)
		if d.required(sc.Name, sp, "name", so, "a short name shown in results") {
			if names[sc.Name] {
				d.errf(d.line(join(sp, "name")), join(sp, "name"), "%s: sanity check name %q is used twice", so, sc.Name)
			}
			names[sc.Name] = true
		}
		d.required(sc.Query, sp, "query", so, "the SQL run against the restored copy")
		for j, o := range sc.GrantExecute {
			if _, _, err := tsql.ParseObjectName(o); err != nil {
				d.errf(d.line(join(sp, "grant_execute")), join(sp, "grant_execute"),
					"%s: grant_execute[%d] %q: name a function of the copy, as schema.function or function", so, j, o)
			}
		}
		var set []string
		for _, k := range []string{ExpectEquals, ExpectAtLeast, ExpectMaxAge} {
			if d.given(join(sp, k)) {
				set = append(set, k)
			}
		}
		switch len(set) {
		case 1:
			db.SanityChecks[i].Expect = set[0]
			if set[0] == ExpectMaxAge && sc.MaxAge <= 0 {
				d.errf(d.line(join(sp, "max_age")), join(sp, "max_age"), "%s: max_age must be positive, e.g. 26h", so)
			}
		case 0:
			d.errf(d.line(sp), sp, "missing expectation in %s: set one of equals, at_least or max_age", so)
		default:
			d.errf(d.line(sp), sp, "%s: set only one of equals, at_least or max_age (found %s)", so, strings.Join(set, ", "))
		}
	}
}

// inherit copies every key of src into dst that the file did not set at path,
// nested sections key by key.
func (d *decoder) inherit(dst, src reflect.Value, path string) {
	fs, _ := fields(dst.Type())
	for name, f := range fs {
		kp := join(path, name)
		dv, sv := dst.FieldByIndex(f.index), src.FieldByIndex(f.index)
		if dv.Kind() == reflect.Struct && d.given(kp) {
			d.inherit(dv, sv, kp)
			continue
		}
		if !d.given(kp) {
			dv.Set(sv)
		}
	}
}
