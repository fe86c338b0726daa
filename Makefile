# backupcycle — the README's commands. `make demo` and `make test` work on a fresh machine with no other step.
GO      ?= go
BIN     ?= bin
STATE   ?= .demo
# Packages whose own code is concurrent and does not link the Temporal server (a -race build of the server's
# dependency tree costs many CPU-minutes on 2 cores): these also run under the race detector.
RACE_PKGS ?= ./internal/sqlsim/... ./internal/storage/... ./internal/sambatest/... ./internal/mssql/...
# Under the race detector, skip only the pure-volume copy (4 x 256 MiB over three Samba setups, ~3 min there): it
# ran in the plain pass, and the copier's concurrency is exercised by every other copier test.
RACE_SKIP ?= ^TestCopyBetweenServers$$
TEST_TIMEOUT ?= 18m

.PHONY: all build test test-deps test-windows demo stack stack-stop stack-upgrade test-stack bench bench-stack chaos lint fmt vet clean screenshots

all: build

# One invocation: the three links run in parallel.
build:
	$(GO) build -o $(BIN)/ ./worker ./starter ./internal/sqlsim/cmd/sqlsim

# What the tests need from the OS (samba, smbclient, nss_wrapper, uid_wrapper, promtool, chromium), installed when missing, and
# versitygw, the S3 server with Object Lock of the object-storage tests, built from tools/versitygw once per version.
test-deps:
	@bash scripts/test-deps.sh
	@bash scripts/versitygw.sh >/dev/null

test: test-deps lint
	$(GO) test -count=1 -timeout $(TEST_TIMEOUT) ./...
	$(GO) test -count=1 -race -timeout $(TEST_TIMEOUT) -skip '$(RACE_SKIP)' $(RACE_PKGS)
	@$(MAKE) --no-print-directory test-windows

# The Windows service mode for real, through Wine's Service Control Manager (worker/service_wine_test.go, build tag
# wine): the worker built for Windows started, polled, health-checked, stopped, failing a start and removed, about
# 40 s, a minute with the test's build. Wine and the MinGW-w64 binutils are installed when missing (scripts/test-deps.sh).
test-windows:
	@bash scripts/test-deps.sh
	$(GO) test -count=1 -tags wine -timeout 10m -run '^TestWindowsServiceUnderWine$$' ./worker/

# The main job on embedded defaults: embedded Temporal + Web UI + worker, emulated SQL instances, backup servers and an
# object store with Object Lock (versitygw, built from tools/versitygw once), in
# the development worker (the production worker ./worker links none of that). KEEP=1 leaves the server and the Web UI
# up afterwards.
demo:
	@bash scripts/versitygw.sh >/dev/null
	$(GO) run ./internal/devenv/cmd/devworker --state-dir $(STATE) --demo $(if $(KEEP),--keep --metrics-addr 127.0.0.1:9090,)

# The production-shaped stack without Docker (README "A production-shaped stack"): PostgreSQL from the OS packages, the
# Temporal server, schema and namespace by the compose file's own scripts, the Web UI, the emulated site and two
# production workers, on free loopback ports, state in $(STACK_STATE). Runs until Ctrl-C or `make stack-stop`, which
# stop every process. The Temporal programs (scripts/temporal-tools.sh): the server, schema tool and Web UI server are
# go.mod's tool lines, compiled into the tests' build cache; the CLI comes from tools/temporalcli, built once per release.
# scripts/stack-build.sh builds them and bin/ (make build's binaries and bin/stack, in one invocation) while the OS
# packages install and the Temporal programs' modules download in the background.
STACK_STATE ?= .stack
stack:
	@tools=$$(GO=$(GO) bash scripts/stack-build.sh $(BIN)) && \
	  exec $(BIN)/stack --state-dir $(STACK_STATE) --tools "$$tools" --worker $(BIN)/worker

stack-stop:
	@$(GO) build -o $(BIN)/stack ./internal/stack/cmd/stack && $(BIN)/stack --stop --state-dir $(STACK_STATE)

# Rolls the running stack's workers over to a fresh `make build` (or WORKER=path): one at a time, each after
# `worker --replay-open` of the new build approved the open workflows (README "Rolling out a new worker").
WORKER ?= $(BIN)/worker
stack-upgrade: build
	@$(GO) build -o $(BIN)/stack ./internal/stack/cmd/stack && $(BIN)/stack --upgrade $(WORKER) --state-dir $(STACK_STATE)

# Brings the stack up, runs one verified cycle on it through the starter, stops it (Ctrl-C, then again with
# `stack --stop`) and checks that no process is left; then, on a fresh stack, replaces both workers by a build with a
# workflow change during a Fleet run (TestStackRollingUpgrade). Not part of `make test`.
test-stack:
	@bash scripts/stack-deps.sh
	@bash scripts/temporal-tools.sh >/dev/null
	$(GO) test -count=1 -tags stack -timeout 25m -v -run '^TestStack' ./internal/stack/

# The README's pictures of the Temporal Web UI (docs/web-ui-*.png) from a fleet run on the dev stack, taken with
# headless Chromium (installed when missing).
screenshots:
	@bash scripts/screenshots.sh

# One iteration of every benchmark. internal/storage/copier's BenchmarkUploadModes prints our SMB upload against
# smbclient in the four modes a server can ask for (unsigned, SMB3 signing, SMB 2.1 signing, encryption) as x_smbclient
# ratios, BenchmarkCopyBetweenServers the price of the read-back (docs/smb-throughput.md). smbclient comes from
# test-deps; without it those benchmarks fail.
bench: test-deps
	BACKUPCYCLE_BENCH_LONG=$(LONG) $(GO) test -run '^$$' -bench . -benchtime 1x -timeout $(if $(LONG),60m,30m) ./...

# The fleet of 200 small databases on the production-shaped stack (PostgreSQL and the Temporal server) beside the
# embedded server, in one run (BenchmarkStackFleetOverhead): cycles per minute, orchestration overhead, history, RPCs
# and the CPU of PostgreSQL and the Temporal server per cycle. Not part of `make bench`.
bench-stack:
	@bash scripts/stack-deps.sh
	@bash scripts/temporal-tools.sh >/dev/null
	$(GO) test -count=1 -tags stack -timeout 90m -run '^$$' -bench '^BenchmarkStackFleetOverhead$$' -benchtime 1x ./internal/stack/

# The seeded fault simulation (internal/chaos): RUNS backup cycles over three source instances, two backup
# servers on Samba, a verification instance, the embedded Temporal server and worker processes, each cycle in a random
# SQL Server estate (versions, time zones, TDE, case, availability group roles) with at most one random fault (among
# them files a share writer plants on one share), now and then a recover or a drill of the log chain's database instead
# of a cycle, and an object store with Object Lock (versitygw) taking immutable copies (down, an upload cut, the worker's
# credentials trying to delete); the invariants I1-I16 are checked after every run. Prints each run and each violation
# with the command that replays it, ends with `chaos: <runs> runs, <faults> faults, <violations> invariant violations (seed <n>)`, and
# fails on a violation. The same SEED replays the same choices. `make test` runs a short budget (4 runs, seed 1).
SEED ?= 1
RUNS ?= 200
chaos: test-deps
	@st=$$(mktemp); \
	{ CHAOS_SEED=$(SEED) CHAOS_RUNS=$(RUNS) $(GO) test -count=1 -timeout 0 -v -run '^TestChaos$$' ./internal/chaos 2>&1; echo $$? >$$st; } \
	  | grep --line-buffered -v -E '^(=== (RUN|PAUSE|CONT) |--- (PASS|FAIL): TestChaos |PASS$$|FAIL$$|ok[[:space:]]|FAIL[[:space:]])'; \
	rc=$$(cat $$st); rm -f $$st; exit $$rc

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	  if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...

fmt:
	gofmt -w $$(git ls-files '*.go')

clean:
	@for l in $(STATE)/*/backup; do if [ -L "$$l" ]; then rm -rf "$$(dirname "$$(readlink -f "$$l")")"; fi; done
	@for l in $(STACK_STATE)/site/*/backup; do if [ -L "$$l" ]; then rm -rf "$$(dirname "$$(readlink -f "$$l")")"; fi; done
	@if [ -x $(BIN)/stack ]; then $(BIN)/stack --stop --state-dir $(STACK_STATE) >/dev/null; fi
	rm -rf $(BIN) $(STATE) $(STACK_STATE)
