// Package stack is the production-shaped stack of `make stack`, without a
// container engine: what docker-compose.yml runs, as processes of this host
// on loopback ports, with the compose file's own scripts and environment.
//
//   - PostgreSQL from the OS packages: a private cluster (initdb) under the
//     state directory, on a free 127.0.0.1 port, as the postgres user when
//     run as root (initdb refuses root);
//   - Temporal's schema by deploy/temporal/setup-schema.sh through
//     deploy/secret-env.sh, exactly the entrypoint and environment of the
//     compose service temporal-schema (its host names and ports replaced by
//     the loopback ones);
//   - the Temporal server, the upstream binary of the compose image's
//     release started by that image's entrypoint, with the compose
//     service's environment (DB=postgres12, deploy/temporal/dynamicconfig.yaml);
//   - namespace and search attributes by deploy/temporal/setup-namespace.sh,
//     as the compose service temporal-namespace;
//   - the Web UI server of the compose image's release;
//   - the emulated site of `make demo` (internal/devenv: the SQL Server
//     emulators, the backup servers on private smbd), run in the supervisor;
//   - two production worker processes (./worker) on the site's
//     configuration: one on the default task queue, one on the task queue of
//     backup server bak02, which runs bak02's copies.
//
// The Temporal programs are built by scripts/temporal-tools.sh: the server,
// its schema tool and the Web UI server from the product's own module graph
// (go.mod's tool lines), the CLI from the module tools/temporalcli. Run
// returns when its context ends (Ctrl-C, `stack --stop`) after stopping every
// process it started, workers first and PostgreSQL last. Meanwhile it
// replaces the workers with another build on request (Upgrade,
// `stack --upgrade`), one at a time.
package stack

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/compose-spec/compose-go/v2/types"
	enumspb "go.temporal.io/api/enums/v1"
	taskqueuepb "go.temporal.io/api/taskqueue/v1"
	"go.temporal.io/api/workflowservice/v1"
	sdkclient "go.temporal.io/sdk/client"
	"go.uber.org/zap"

	"github.com/backupcycle/backupcycle/internal/devenv"
	"github.com/backupcycle/backupcycle/workflows"
)

// Names and files of the stack.
const (
	// PidFile holds the supervisor's pid while it runs.
	PidFile = "stack.pid"
	// Namespace is the namespace setup-namespace.sh creates (compose's).
	Namespace = "default"
	// CopyServer is the backup server whose copies run on a worker of its
	// own, polling CopyQueue.
	CopyServer = "bak02"
	CopyQueue  = "backupcycle-bak02"
	// pgUser is who runs PostgreSQL when the stack runs as root.
	pgUser = "postgres"
	// PostgresRoot is where the cluster lives when the postgres user
	// cannot reach the state directory (a clone in a home directory of mode
	// 0700, a test's temporary directory): <PostgresRoot>/<hash of the
	// state directory>.
	PostgresRoot = "/var/tmp/backupcycle-stack"
)

// Options configure Run.
type Options struct {
	// StateDir holds everything (created when missing): the PostgreSQL
	// cluster, the emulated site, logs/, secrets/. Kept between runs.
	StateDir string
	// Repo is the repository root: docker-compose.yml and deploy/.
	Repo string
	// Tools is the directory scripts/temporal-tools.sh prints.
	Tools string
	// Worker is the production worker binary (make build's bin/worker).
	Worker string
	// DatabaseSize of the emulated Sales when the site is created.
	DatabaseSize int64
	// FleetDatabases is how many small databases the site holds besides
	// Sales, picked by the Fleet's selection (devenv.Options.FleetDatabases).
	FleetDatabases int
	// Upgrades, when set, delivers new worker builds: each replaces the
	// workers one at a time (Upgrade).
	Upgrades <-chan Upgrade

	Logger *zap.Logger
	// Progress, when set, gets a line per step of the bring-up and its time.
	Progress io.Writer
}

// Addresses are where the running stack listens.
type Addresses struct {
	Postgres, Frontend, UI string
	Metrics                []string // the workers' /metrics, default queue first
	ConfigFile             string   // the workers' configuration
	// Site is the emulated site, run in this process.
	Site *devenv.Site
}

// Upgrade asks the running stack to replace its workers with another build,
// as the README's "Rolling out a new worker" does it: one worker at a time,
// each only after `worker --replay-open` of the new build on its task queue
// exited 0; the old worker is stopped with SIGTERM (it stops polling and
// gives its activities 10 seconds; Temporal hands what was left to the new
// one) and the new one started in its place, on the same metrics address.
type Upgrade struct {
	// Worker is the new build's binary.
	Worker string
	// Result gets nil once every worker runs the new build, else what
	// stopped the upgrade (the workers not yet replaced keep the old build).
	Result chan<- error
}

// worker is a worker process of the stack: its arguments after the binary.
type worker struct {
	name string
	args []string
}

type stack struct {
	o                   Options
	project             *types.Project
	logs, pids, secrets string
	images              map[string]string
	base                []string // environment of every process
	procs               []*proc  // long-running, in start order
	site                *devenv.Site
	siteAt              int // procs[siteAt:] started after the site
	workers             []worker
}

// Run brings the stack up, calls ready with its addresses and the time it
// took, and runs until ctx ends; then it stops everything.
func Run(ctx context.Context, o Options, ready func(Addresses, time.Duration)) (err error) {
	began := time.Now()
	if o.Logger == nil {
		o.Logger = zap.NewNop()
	}
	for _, p := range []*string{&o.StateDir, &o.Repo, &o.Tools, &o.Worker} {
		if *p, err = filepath.Abs(*p); err != nil {
			return err
		}
	}
	st := &stack{o: o, logs: filepath.Join(o.StateDir, "logs"), pids: filepath.Join(o.StateDir, "pids"), secrets: filepath.Join(o.StateDir, "secrets")}
	for _, d := range []string{st.logs, st.pids, filepath.Join(o.StateDir, "home")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return fmt.Errorf("stack: state directory: %w (choose another with --state-dir)", err)
		}
	}
	if err := os.MkdirAll(st.secrets, 0o700); err != nil {
		return fmt.Errorf("stack: state directory: %w", err)
	}
	lock, err := lockFile(filepath.Join(o.StateDir, "stack.lock"))
	if err != nil {
		return err
	}
	defer lock.Close()
	if err := os.WriteFile(filepath.Join(o.StateDir, PidFile), []byte(strconv.Itoa(os.Getpid())+"\n"), 0o644); err != nil {
		return err
	}
	defer os.Remove(filepath.Join(o.StateDir, PidFile))
	for _, f := range []string{"temporal-server", "temporal-sql-tool", "ui-server", "temporal", "entrypoint.sh"} {
		if _, err := os.Stat(filepath.Join(o.Tools, f)); err != nil {
			return fmt.Errorf("stack: %s is missing from %s: build the tools with scripts/temporal-tools.sh (make stack does)", f, o.Tools)
		}
	}
	if st.project, err = loadCompose(ctx, o.Repo); err != nil {
		return err
	}
	// The server image's entrypoint needs a shell with pipefail: the
	// image's busybox sh has it, Debian's dash has not.
	entry := filepath.Join(o.StateDir, "bin", "temporal-entrypoint.sh")
	if err := os.MkdirAll(filepath.Dir(entry), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(entry, []byte("#!/bin/sh\nexec bash "+shellQuote(filepath.Join(o.Tools, "entrypoint.sh"))+" \"$@\"\n"), 0o755); err != nil {
		return err
	}
	st.images = map[string]string{"/etc/temporal/entrypoint.sh": entry}
	// The tools come first on PATH, as in the images (temporal-server,
	// temporal-sql-tool, temporal); HOME keeps the CLI's own files here.
	st.base = []string{"PATH=" + o.Tools + string(os.PathListSeparator) + os.Getenv("PATH"), "HOME=" + filepath.Join(o.StateDir, "home"), "LANG=C.UTF-8"}

	defer func() {
		if stopErr := st.stopAll(); stopErr != nil {
			o.Logger.Warn("stack did not stop cleanly", zap.Error(stopErr))
			if err == nil {
				err = stopErr
			}
		}
	}()

	ports, err := st.ports()
	if err != nil {
		return err
	}
	addr := func(p int) string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(p)) }
	pgPort, uiPort, metrics := ports[0], ports[1], []int{ports[2], ports[3]}
	frontend := addr(ports[4])

	last := time.Now()
	step := func(what string) {
		if o.Progress != nil {
			fmt.Fprintf(o.Progress, "  %-70s %s\n", what, time.Since(last).Round(100*time.Millisecond))
		}
		last = time.Now()
	}
	// PostgreSQL.
	if err := st.startPostgres(ctx, pgPort); err != nil {
		return err
	}
	step("PostgreSQL on " + addr(pgPort))
	// Temporal's schema: the compose service temporal-schema.
	svc, err := st.service("temporal-schema")
	if err != nil {
		return err
	}
	replace, add := schemaEnv(pgPort, o.Tools)
	if err := st.runService(ctx, svc, replace, add, true); err != nil {
		return err
	}
	step("temporal-schema: Temporal's databases at the newest schema")
	// The server: the compose service temporal, every port a free loopback one.
	if svc, err = st.service("temporal"); err != nil {
		return err
	}
	replace, add = serverEnv(pgPort, ports[4:])
	if err := st.runService(ctx, svc, replace, add, false); err != nil {
		return err
	}
	// Namespace and search attributes: the compose service temporal-namespace.
	if svc, err = st.service("temporal-namespace"); err != nil {
		return err
	}
	if err := st.runService(ctx, svc, namespaceEnv(frontend), nil, true); err != nil {
		return err
	}
	step("temporal (server) and temporal-namespace: namespace " + Namespace + " and its search attributes")
	// The Web UI: the compose service temporal-ui, with the image's
	// configuration template and loopback only.
	uiURL, err := st.startUI(ctx, frontend, uiPort)
	if err != nil {
		return err
	}
	step("temporal-ui")

	// The emulated site of `make demo`, bak02 with a task queue of its own.
	site, err := devenv.Start(ctx, devenv.Options{
		StateDir:        filepath.Join(o.StateDir, "site"),
		DatabaseSize:    o.DatabaseSize,
		TemporalAddress: frontend,
		Namespace:       Namespace,
		TaskQueues:      map[string]string{CopyServer: CopyQueue},
		FleetDatabases:  o.FleetDatabases,
		Logger:          o.Logger.Named("sqlsim"),
	})
	if err != nil {
		return err
	}
	// Stopped after the workers, which use it, and before the rest.
	st.site, st.siteAt = site, len(st.procs)

	step("emulated site")
	// Two production workers.
	var metricsURLs []string
	for i, queue := range []string{"", CopyQueue} {
		w := worker{name: "worker", args: []string{"--config", site.ConfigFile, "--metrics-addr", addr(metrics[i])}}
		if queue != "" {
			w = worker{name: "worker-" + CopyServer, args: append(w.args, "--task-queue", queue)}
		}
		p, err := st.start(st.workerSpec(w, o.Worker))
		if err != nil {
			return err
		}
		st.procs = append(st.procs, p)
		st.workers = append(st.workers, w)
		metricsURLs = append(metricsURLs, "http://"+addr(metrics[i])+"/metrics")
	}
	if err := st.waitPollers(ctx, frontend, step); err != nil {
		return err
	}
	step("workers polling their task queues")
	ready(Addresses{Postgres: addr(pgPort), Frontend: frontend, UI: uiURL, Metrics: metricsURLs, ConfigFile: site.ConfigFile, Site: site}, time.Since(began))
	return st.wait(ctx, step)
}

func (st *stack) workerSpec(w worker, bin string) spec {
	return spec{name: w.name, argv: append([]string{bin}, w.args...), env: append(os.Environ(), st.base...), dir: st.o.StateDir}
}

// upgrade replaces the workers with bin, one at a time (Upgrade).
func (st *stack) upgrade(ctx context.Context, bin string, step func(string)) error {
	bin, err := filepath.Abs(bin)
	if err != nil {
		return err
	}
	for _, w := range st.workers {
		i := slices.IndexFunc(st.procs, func(p *proc) bool { return p.name == w.name })
		// --replay-open on the worker's own task queue and configuration.
		replay := st.workerSpec(worker{name: "replay-" + w.name, args: replayArgs(w.args)}, bin)
		if err := st.runOnce(ctx, replay); err != nil {
			return fmt.Errorf("stack: %s keeps its build: %w", w.name, err)
		}
		step(fmt.Sprintf("%s: %s --replay-open approves the open workflows", w.name, bin))
		if err := st.procs[i].stop(45 * time.Second); err != nil {
			return err
		}
		from := int64(0)
		if fi, err := os.Stat(st.procs[i].log); err == nil {
			from = fi.Size()
		}
		p, err := st.start(st.workerSpec(w, bin))
		if err != nil {
			return err
		}
		st.procs[i] = p
		if err := poll(ctx, p, 90*time.Second, func() bool { return logSince(p.log, from, "backupcycle worker ready") }); err != nil {
			return err
		}
		step(fmt.Sprintf("%s: stopped (SIGTERM), the new build polls in its place", w.name))
	}
	return nil
}

// replayArgs are a worker's arguments for --replay-open: its configuration
// and task queue, not its metrics address.
func replayArgs(args []string) []string {
	out := []string{"--replay-open"}
	for i := 0; i+1 < len(args); i += 2 {
		if args[i] != "--metrics-addr" {
			out = append(out, args[i], args[i+1])
		}
	}
	return out
}

// logSince reports whether the log holds text after offset from.
func logSince(path string, from int64, text string) bool {
	b, err := os.ReadFile(path)
	return err == nil && int64(len(b)) > from && strings.Contains(string(b[from:]), text)
}

// What the stack changes in the compose services' environment: the host
// names and ports of the compose network become loopback ports (replace),
// and the image defaults that would collide on one host get free ports (add).

func schemaEnv(pgPort int, tools string) (replace, add map[string]string) {
	return map[string]string{"POSTGRES_SEEDS": "127.0.0.1", "DB_PORT": strconv.Itoa(pgPort)},
		map[string]string{"TEMPORAL_SCHEMA_DIR": filepath.Join(tools, "schema", "postgresql", "v12")}
}

// serverPortVars are the server's listen ports (the embedded config
// template's variables), each given a free port.
var serverPortVars = []string{"FRONTEND_GRPC_PORT", "FRONTEND_HTTP_PORT", "FRONTEND_MEMBERSHIP_PORT", "HISTORY_GRPC_PORT",
	"HISTORY_MEMBERSHIP_PORT", "MATCHING_GRPC_PORT", "MATCHING_MEMBERSHIP_PORT", "WORKER_GRPC_PORT", "WORKER_MEMBERSHIP_PORT",
	"INTERNAL_FRONTEND_HTTP_PORT"}

// serverEnv: ports[0] is the frontend's gRPC port. The compose file binds
// every interface of the container (BIND_ON_IP 0.0.0.0) and publishes only
// 7233 on loopback; here the server binds loopback itself.
func serverEnv(pgPort int, ports []int) (replace, add map[string]string) {
	add = map[string]string{}
	for i, k := range serverPortVars {
		add[k] = strconv.Itoa(ports[i])
	}
	return map[string]string{"POSTGRES_SEEDS": "127.0.0.1", "DB_PORT": strconv.Itoa(pgPort), "BIND_ON_IP": "127.0.0.1"}, add
}

func namespaceEnv(frontend string) map[string]string {
	return map[string]string{"TEMPORAL_ADDRESS": frontend}
}

func uiEnv(frontend, url string, port int) (replace, add map[string]string) {
	return map[string]string{"TEMPORAL_ADDRESS": frontend, "TEMPORAL_CORS_ORIGINS": url},
		map[string]string{"TEMPORAL_UI_PORT": strconv.Itoa(port)}
}

// wait returns when ctx ends (nil) or a process of the stack exits (error);
// meanwhile it carries out the upgrades of Options.Upgrades.
func (st *stack) wait(ctx context.Context, step func(string)) error {
	for {
		wctx, cancel := context.WithCancel(ctx)
		select {
		case <-ctx.Done():
			cancel()
			return nil
		case p := <-st.watch(wctx):
			cancel()
			return p.exited()
		case u := <-st.o.Upgrades:
			// The workers it stops are not the stack's end.
			cancel()
			err := st.upgrade(ctx, u.Worker, step)
			select {
			case u.Result <- err:
			case <-ctx.Done():
				return nil
			}
		}
	}
}

// watch delivers the first long-running process that exits before ctx ends.
func (st *stack) watch(ctx context.Context) <-chan *proc {
	exited := make(chan *proc, len(st.procs))
	for _, p := range st.procs {
		go func() {
			select {
			case <-p.done:
				exited <- p
			case <-ctx.Done():
			}
		}()
	}
	return exited
}

// stopAll stops the long-running processes and the site in reverse start
// order: the workers first (they finish or hand back their tasks), then the
// site, PostgreSQL last.
// PostgreSQL gets SIGINT, its fast shutdown.
func (st *stack) stopAll() error {
	var errs []error
	for i := len(st.procs) - 1; i >= 0; i-- {
		if i == st.siteAt-1 && st.site != nil {
			errs = append(errs, st.site.Stop())
			st.site = nil
		}
		p := st.procs[i]
		sig := syscall.SIGTERM
		if p.name == "postgresql" {
			sig = syscall.SIGINT
		}
		errs = append(errs, p.stopWith(sig, 45*time.Second))
	}
	st.procs = nil
	if st.site != nil {
		errs = append(errs, st.site.Stop())
		st.site = nil
	}
	return errors.Join(errs...)
}

// runService runs a compose service's entrypoint here: once to its end
// (oneShot), or as a process of the stack.
func (st *stack) runService(ctx context.Context, svc service, replace, add map[string]string, oneShot bool) error {
	argv, err := svc.command()
	if err != nil {
		return err
	}
	env, err := svc.environ(append(os.Environ(), st.base...), replace, add)
	if err != nil {
		return err
	}
	s := spec{name: svc.svc.Name, argv: argv, env: env, dir: st.o.StateDir}
	if oneShot {
		return st.runOnce(ctx, s)
	}
	p, err := st.start(s)
	if err != nil {
		return err
	}
	st.procs = append(st.procs, p)
	return nil
}

// startUI runs the Web UI server as the image does (`ui-server --env docker
// start` on the image's config/docker.yaml), on 127.0.0.1 only, and waits
// for its /healthz (the compose healthcheck).
func (st *stack) startUI(ctx context.Context, frontend string, port int) (string, error) {
	svc, err := st.service("temporal-ui")
	if err != nil {
		return "", err
	}
	root := filepath.Join(st.o.StateDir, "ui")
	if err := os.MkdirAll(filepath.Join(root, "config"), 0o755); err != nil {
		return "", err
	}
	// base.yaml is read before docker.yaml, which sets no host: the server
	// listens on loopback, as the compose file publishes it.
	if err := os.WriteFile(filepath.Join(root, "config", "base.yaml"), []byte("host: 127.0.0.1\n"), 0o644); err != nil {
		return "", err
	}
	tmpl, err := os.ReadFile(filepath.Join(st.o.Tools, "ui", "config", "docker.yaml"))
	if err != nil {
		return "", fmt.Errorf("stack: the Web UI's configuration template: %w (rebuild with scripts/temporal-tools.sh)", err)
	}
	if err := os.WriteFile(filepath.Join(root, "config", "docker.yaml"), tmpl, 0o644); err != nil {
		return "", err
	}
	url := fmt.Sprintf("http://localhost:%d", port)
	replace, add := uiEnv(frontend, url, port)
	env, err := svc.environ(append(os.Environ(), st.base...), replace, add)
	if err != nil {
		return "", err
	}
	p, err := st.start(spec{name: svc.svc.Name, argv: []string{filepath.Join(st.o.Tools, "ui-server"), "--root", root, "--env", "docker", "start"}, env: env, dir: root})
	if err != nil {
		return "", err
	}
	st.procs = append(st.procs, p)
	health := fmt.Sprintf("http://127.0.0.1:%d/healthz", port)
	err = poll(ctx, p, 60*time.Second, func() bool {
		resp, err := http.Get(health)
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	return url, err
}

// waitPollers waits until both workers poll their task queues.
func (st *stack) waitPollers(ctx context.Context, frontend string, step func(string)) error {
	c, err := sdkclient.DialContext(ctx, sdkclient.Options{HostPort: frontend, Namespace: Namespace, Logger: quietLogger{}})
	if err != nil {
		return fmt.Errorf("stack: Temporal at %s: %w", frontend, err)
	}
	defer c.Close()
	// The search attributes setup-namespace.sh registered reach the
	// frontend's namespace cache some seconds later; until then a cycle
	// does not start ("no mapping defined for search attribute"). A
	// visibility query over all of them is refused on the same grounds.
	var terms []string
	for name, kind := range workflows.SearchAttributeTypes {
		if kind == enumspb.INDEXED_VALUE_TYPE_INT {
			terms = append(terms, name+" = 0")
		} else {
			terms = append(terms, name+" = 'stack'")
		}
	}
	sort.Strings(terms)
	server := st.procs[len(st.procs)-4] // the Temporal server: before the Web UI and the two workers
	if err := poll(ctx, server, 60*time.Second, func() bool {
		_, err := c.CountWorkflow(ctx, &workflowservice.CountWorkflowExecutionsRequest{Namespace: Namespace, Query: strings.Join(terms, " OR ")})
		return err == nil
	}); err != nil {
		return fmt.Errorf("%w (the search attributes are not usable on namespace %s)", err, Namespace)
	}
	step("search attributes usable")
	for i, q := range []struct {
		name string
		kind enumspb.TaskQueueType
	}{{workflows.TaskQueue, enumspb.TASK_QUEUE_TYPE_WORKFLOW}, {CopyQueue, enumspb.TASK_QUEUE_TYPE_ACTIVITY}} {
		p := st.procs[len(st.procs)-2+i]
		err := poll(ctx, p, 90*time.Second, func() bool {
			resp, err := c.WorkflowService().DescribeTaskQueue(ctx, &workflowservice.DescribeTaskQueueRequest{
				Namespace: Namespace, TaskQueue: &taskqueuepb.TaskQueue{Name: q.name, Kind: enumspb.TASK_QUEUE_KIND_NORMAL}, TaskQueueType: q.kind})
			return err == nil && len(resp.GetPollers()) > 0
		})
		if err != nil {
			return fmt.Errorf("%w (no poller on task queue %s)", err, q.name)
		}
	}
	return nil
}

// poll calls ok until it is true, p exits or the timeout passes.
func poll(ctx context.Context, p *proc, timeout time.Duration, ok func() bool) error {
	deadline := time.Now().Add(timeout)
	for !ok() {
		select {
		case <-p.done:
			return p.exited()
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("stack: %s not ready after %s; its log %s ends:\n%s", p.name, timeout, p.log, tail(p.log, 15))
		}
	}
	return nil
}

// startPostgres initialises the private cluster on first use (superuser and
// password as the compose service's POSTGRES_USER and postgres_password
// secret) and starts it on 127.0.0.1:port, with no Unix socket.
func (st *stack) startPostgres(ctx context.Context, port int) error {
	svc, err := st.service("postgresql")
	if err != nil {
		return err
	}
	pgUserName := ""
	if v := svc.svc.Environment["POSTGRES_USER"]; v != nil {
		pgUserName = *v
	}
	if pgUserName == "" {
		return errors.New("stack: compose service postgresql sets no POSTGRES_USER")
	}
	bin, err := postgresBin()
	if err != nil {
		return err
	}
	password, err := devenv.EnsureSecret(filepath.Join(st.secrets, "postgres_password"), "", 18)
	if err != nil {
		return err
	}
	cred, dir, err := st.postgresDir()
	if err != nil {
		return err
	}
	data := filepath.Join(dir, "data")
	if _, err := os.Stat(filepath.Join(data, "PG_VERSION")); err != nil {
		pw := filepath.Join(dir, "pwfile")
		if err := os.WriteFile(pw, []byte(password+"\n"), 0o600); err != nil {
			return err
		}
		defer os.Remove(pw)
		if cred != nil {
			if err := os.Chown(pw, int(cred.Uid), int(cred.Gid)); err != nil {
				return err
			}
		}
		_ = os.RemoveAll(data)
		if err := st.runOnce(ctx, spec{name: "initdb", argv: []string{filepath.Join(bin, "initdb"), "-D", data, "-U", pgUserName,
			"--pwfile", pw, "--auth", "scram-sha-256", "-E", "UTF8", "--locale", "C"}, env: append(os.Environ(), st.base...), dir: dir, cred: cred}); err != nil {
			return err
		}
	}
	p, err := st.start(spec{name: "postgresql", argv: []string{filepath.Join(bin, "postgres"), "-D", data, "-p", strconv.Itoa(port),
		"-c", "listen_addresses=127.0.0.1", "-c", "unix_socket_directories="}, env: append(os.Environ(), st.base...), dir: dir, cred: cred})
	if err != nil {
		return err
	}
	st.procs = append(st.procs, p)
	return poll(ctx, p, 60*time.Second, func() bool {
		return exec.Command(filepath.Join(bin, "pg_isready"), "-q", "-h", "127.0.0.1", "-p", strconv.Itoa(port)).Run() == nil
	})
}

// postgresDir is the directory of the cluster and who runs it: the
// supervisor's user, or the postgres user when that is root. The postgres
// user must reach it; when it cannot reach the state directory, the
// cluster lives under PostgresRoot.
func (st *stack) postgresDir() (*syscall.Credential, string, error) {
	dir := filepath.Join(st.o.StateDir, "postgresql")
	if os.Geteuid() != 0 {
		return nil, dir, os.MkdirAll(dir, 0o700)
	}
	u, err := user.Lookup(pgUser)
	if err != nil {
		return nil, "", fmt.Errorf("stack: PostgreSQL refuses to run as root and there is no user %s: install PostgreSQL from the OS packages (scripts/stack-deps.sh)", pgUser)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	cred := &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
	reach := exec.Command("test", "-x", st.o.StateDir)
	reach.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	if reach.Run() != nil {
		dir = PostgresDir(st.o.StateDir)
		if err := os.MkdirAll(PostgresRoot, 0o755); err != nil {
			return nil, "", err
		}
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, "", err
	}
	return cred, dir, os.Chown(dir, uid, gid)
}

// PostgresDir is where the cluster of a state directory lives when the
// postgres user cannot reach the state directory.
func PostgresDir(stateDir string) string {
	sum := sha256.Sum256([]byte(stateDir))
	return filepath.Join(PostgresRoot, hex.EncodeToString(sum[:8]))
}

// postgresBin is the newest PostgreSQL of the OS packages
// (/usr/lib/postgresql/<major>/bin, Debian's layout), else the directory of
// initdb on PATH.
func postgresBin() (string, error) {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool {
		a, _ := strconv.Atoi(filepath.Base(filepath.Dir(dirs[i])))
		b, _ := strconv.Atoi(filepath.Base(filepath.Dir(dirs[j])))
		return a > b
	})
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "initdb")); err == nil {
			return d, nil
		}
	}
	if p, err := exec.LookPath("initdb"); err == nil {
		return filepath.Dir(p), nil
	}
	return "", errors.New("stack: PostgreSQL is not installed (no initdb): run scripts/stack-deps.sh, or install postgresql from the OS packages")
}

func lockFile(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil, fmt.Errorf("stack: %s is in use by a running stack: stop it (make stack-stop), or use another --state-dir", filepath.Dir(path))
	}
	return f, nil
}

func freePorts(n int) ([]int, error) {
	var out []int
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("stack: a free loopback port: %w", err)
		}
		ls = append(ls, l)
		out = append(out, l.Addr().(*net.TCPAddr).Port)
	}
	return out, nil
}

// numPorts is how many ports the stack listens on: PostgreSQL, the Web UI,
// the two workers' metrics and the server's (serverPortVars).
const numPorts = 4 + 10

// ports are the stack's ports: those of its last run, kept in
// <state>/ports, where each is still free (the addresses stay the same from
// run to run, and the restarted Temporal server has the address its
// predecessor recorded in the cluster membership, which otherwise routes
// requests to a member that is gone until it is declared dead); a free one
// where not.
func (st *stack) ports() ([]int, error) {
	file := filepath.Join(st.o.StateDir, "ports")
	var kept []int
	if b, err := os.ReadFile(file); err == nil {
		for _, f := range strings.Fields(string(b)) {
			if p, err := strconv.Atoi(f); err == nil {
				kept = append(kept, p)
			}
		}
	}
	fresh, err := freePorts(numPorts)
	if err != nil {
		return nil, err
	}
	ports := make([]int, numPorts)
	for i := range ports {
		ports[i] = fresh[i]
		// The server records its membership port in a smallint column of
		// its cluster_membership table: ports above 32767 (the ephemeral
		// range free ports come from) are refused there.
		if i >= 4 && strings.HasSuffix(serverPortVars[i-4], "_MEMBERSHIP_PORT") {
			if ports[i], err = freeLowPort(); err != nil {
				return nil, err
			}
		}
		if len(kept) == numPorts && portFree(kept[i]) && !slices.Contains(ports[:i], kept[i]) && !slices.Contains(fresh[i+1:], kept[i]) {
			ports[i] = kept[i]
		}
	}
	var b strings.Builder
	for _, p := range ports {
		fmt.Fprintf(&b, "%d\n", p)
	}
	return ports, os.WriteFile(file, []byte(b.String()), 0o644)
}

func portFree(port int) bool {
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return false
	}
	l.Close()
	return true
}

// freeLowPort is a free loopback port below 32768.
func freeLowPort() (int, error) {
	var b [2]byte
	for range 200 {
		_, _ = rand.Read(b[:])
		if port := 20000 + (int(b[0])<<8|int(b[1]))%12000; portFree(port) {
			return port, nil
		}
	}
	return 0, errors.New("stack: no free loopback port between 20000 and 32000")
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// quietLogger keeps the SDK client's lines out of the terminal.
type quietLogger struct{}

func (quietLogger) Debug(string, ...any) {}
func (quietLogger) Info(string, ...any)  {}
func (quietLogger) Warn(string, ...any)  {}
func (quietLogger) Error(string, ...any) {}
