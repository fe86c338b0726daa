#!/usr/bin/env bash
# `make screenshots`: the README's pictures of the Temporal Web UI, taken from a real run. Starts the development
# worker (embedded Temporal + Web UI + worker + the emulated site with a few small databases besides Sales) in a
# temporary state directory, runs the Fleet over it twice (the second run continues each database's rotation), then captures
# with headless Chromium (Debian's package, installed when missing) via internal/webshot (chromedp):
#   docs/web-ui-fleet.png   the Fleet run's page, User Metadata tab: its summary and current details (every
#                           database's outcome, the limits in use); its children are the cycles
#   docs/web-ui-cycles.png  the workflow list filtered to verified cycles of sql01, with the backup search attributes
#                           as columns
#   docs/web-ui-cycle.png   one cycle's page (Sales), User Metadata tab: its static summary and its details
# Each capture waits until the page shows the run's own data and is refused when it looks blank. Everything it
# started is stopped on exit. OUT=dir writes elsewhere; FLEET=n sets the number of small databases (default 8).
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-docs}
FLEET=${FLEET:-7} # 8 databases: the list of both runs' 16 cycles fits the window
GO=${GO:-go}
began=$(date +%s)

need=()
command -v chromium >/dev/null 2>&1 || need+=(chromium)
command -v curl >/dev/null 2>&1 || need+=(curl)
if [ ${#need[@]} -gt 0 ]; then
  echo "screenshots: installing ${need[*]}" >&2
  SUDO=""
  if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${need[@]}" fonts-dejavu-core >/dev/null
fi

work=$(mktemp -d)
worker_pid=""
cleanup() {
  local rc=$?
  if [ -n "$worker_pid" ] && kill -0 "$worker_pid" 2>/dev/null; then
    # SIGTERM lets the worker stop its emulators and smbds; its process group catches what a hung stop leaves.
    kill -TERM "$worker_pid" 2>/dev/null || true
    for _ in $(seq 60); do kill -0 "$worker_pid" 2>/dev/null || break; sleep 0.5; done
  fi
  if [ -n "$worker_pid" ]; then kill -KILL -- "-$worker_pid" 2>/dev/null || true; fi
  if [ $rc -ne 0 ] && [ -f "$work/worker.err" ]; then
    echo "screenshots: failed; the worker's log ends with:" >&2
    tail -n 20 "$work/worker.err" >&2
  fi
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

echo "screenshots: building" >&2
$GO build -o "$work/bin/devworker" ./internal/devenv/cmd/devworker
$GO build -o "$work/bin/starter" ./starter
$GO build -o "$work/bin/webshot" ./internal/webshot/cmd/webshot

# setsid: the worker leads its own process group, so cleanup can end the smbds it started even if it hangs.
setsid "$work/bin/devworker" --state-dir "$work/state" --port 0 --ui-port 0 --dev-db-size 16MiB --dev-fleet "$FLEET" \
  >"$work/worker.out" 2>"$work/worker.err" &
worker_pid=$!
for _ in $(seq 360); do
  grep -q '^  stop:' "$work/worker.out" 2>/dev/null && break
  kill -0 "$worker_pid" 2>/dev/null || { echo "screenshots: the dev worker exited before it was ready" >&2; exit 1; }
  sleep 0.5
done
grep -q '^  stop:' "$work/worker.out" || { echo "screenshots: the dev worker was not ready within 3 minutes" >&2; exit 1; }
ui=$(sed -n 's/^  Temporal Web UI: *//p' "$work/worker.out")
cfg="$work/state/config.dev.yaml"
echo "screenshots: dev stack up, Web UI $ui" >&2

for run in 1 2; do
  echo "screenshots: fleet run $run of 2" >&2
  "$work/bin/starter" fleet --config "$cfg" --wait --timeout 10m >&2
done

fleet_run=$(curl -fsS "$ui/api/v1/namespaces/default/workflows/backupcycle-fleet" | sed -n 's/.*"runId": *"\([^"]*\)".*/\1/p' | head -n 1)
[ -n "$fleet_run" ] || { echo "screenshots: no run of workflow backupcycle-fleet in $ui" >&2; exit 1; }
mkdir -p "$OUT"
databases=$((FLEET + 1))

"$work/bin/webshot" -url "$ui/namespaces/default/workflows/backupcycle-fleet/$fleet_run/user-metadata" \
  -wait "Current Details" -wait "verified $databases" -wait "Sales@sql01" -out "$OUT/web-ui-fleet.png"

query='WorkflowType="BackupCycle" AND BackupInstance="sql01" AND BackupOutcome="verified"'
columns='{"default":[{"label":"Status"},{"label":"Workflow ID"},{"label":"BackupSequence"},{"label":"BackupServer"},{"label":"BackupOutcome"},{"label":"Start"},{"label":"Execution Duration"}]}'
# The list's columns are the Web UI's saved preference (what "Configure columns" stores in localStorage).
"$work/bin/webshot" -url "$ui/namespaces/default/workflows?query=$(printf '%s' "$query" | sed 's/ /%20/g; s/"/%22/g; s/=/%3D/g')" \
  -local-storage "namespace-workflow-table-columns=$columns" \
  -wait "$((2 * databases)) Workflows" -wait "backup-sql01-Sales" -wait "bak02" -out "$OUT/web-ui-cycles.png"

sales_run=$(curl -fsS "$ui/api/v1/namespaces/default/workflows/backup-sql01-Sales" | sed -n 's/.*"runId": *"\([^"]*\)".*/\1/p' | head -n 1)
[ -n "$sales_run" ] || { echo "screenshots: no run of workflow backup-sql01-Sales in $ui" >&2; exit 1; }
"$work/bin/webshot" -url "$ui/namespaces/default/workflows/backup-sql01-Sales/$sales_run/user-metadata" \
  -wait "Current Details" -wait "Sales@sql01 → bak02" -out "$OUT/web-ui-cycle.png"

echo "screenshots: done in $(( $(date +%s) - began ))s: $OUT/web-ui-fleet.png, $OUT/web-ui-cycles.png, $OUT/web-ui-cycle.png" >&2
