#!/usr/bin/env bash
# Everything `make stack` needs before the stack starts, overlapped where it can be: the OS packages
# (scripts/stack-deps.sh, apt-get, mostly network and disk) and the download of the Go modules the Temporal programs
# need run in the background while the compiler, the one CPU-bound step, has both cores for the product's binaries
# (worker, starter, sqlsim and stack, in one `go build`: their shared packages are compiled once and the links run
# side by side) and then the Temporal programs (scripts/temporal-tools.sh). Prints the Temporal programs' directory.
# Usage: scripts/stack-build.sh BIN_DIR
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
bin=${1:?usage: scripts/stack-build.sh BIN_DIR}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# apt-get in the background only when it cannot ask for a password: as root, or with sudo that needs none.
deps=""
if [ "$(id -u)" = 0 ] || sudo -n true 2>/dev/null; then
  bash scripts/stack-deps.sh >"$tmp/deps.log" 2>&1 &
  deps=$!
else
  bash scripts/stack-deps.sh
fi

# The modules of the Temporal programs, fetched while the product compiles (the product's own come with its build).
# A failure here is not reported: the build that needs the module downloads it again and says why it cannot.
{
  $GO list -mod=readonly -deps go.temporal.io/server/cmd/server go.temporal.io/server/cmd/tools/sql \
    github.com/temporalio/ui-server/v2/cmd/server >/dev/null 2>&1 || true
  $GO list -C tools/temporalcli -mod=readonly -deps github.com/temporalio/cli/cmd/temporal >/dev/null 2>&1 || true
} &
fetch=$!

rc=0
$GO build -o "$bin/" ./worker ./starter ./internal/sqlsim/cmd/sqlsim ./internal/stack/cmd/stack || rc=$?
tools=""
if [ $rc = 0 ]; then
  tools=$(bash scripts/temporal-tools.sh) || rc=$?
fi
wait "$fetch" || true
if [ -n "$deps" ]; then
  drc=0
  wait "$deps" || drc=$?
  cat "$tmp/deps.log" >&2
  if [ $drc != 0 ]; then
    echo "stack-build: scripts/stack-deps.sh failed (exit $drc): its output is above" >&2
    exit $drc
  fi
fi
if [ $rc != 0 ]; then
  exit $rc
fi
echo "$tools"
