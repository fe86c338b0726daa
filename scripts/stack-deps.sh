#!/usr/bin/env bash
# Installs what the production-shaped stack (`make stack`) needs from the OS when it is missing: PostgreSQL (Temporal's
# database: initdb, postgres and pg_isready from Debian's packages), netcat (deploy/temporal/setup-schema.sh waits for
# PostgreSQL with `nc -z`, as in the admin-tools image), and Samba with nss_wrapper (the emulated backup servers' private
# smbd). Idempotent: does nothing when everything is there. Like scripts/test-deps.sh, it stops the system services the
# packages start on install: the stack runs its own PostgreSQL and smbd on free loopback ports.
set -euo pipefail

need=()
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || need+=(postgresql)
command -v nc >/dev/null 2>&1 || need+=(netcat-openbsd)
command -v smbd >/dev/null 2>&1 || [ -x /usr/sbin/smbd ] || need+=(samba)
ls /usr/lib/*/libnss_wrapper.so >/dev/null 2>&1 || need+=(libnss-wrapper)

if [ ${#need[@]} -eq 0 ]; then
  exit 0
fi

echo "stack-deps: installing ${need[*]}" >&2
SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
# Only the services of the packages installed here: a PostgreSQL or Samba already on the machine is left as it was.
for pkg in "${need[@]}"; do
  case "$pkg" in
    postgresql) svcs="postgresql" ;;
    samba) svcs="smbd nmbd samba-ad-dc" ;;
    *) svcs="" ;;
  esac
  for svc in $svcs; do
    $SUDO systemctl disable --now "$svc" >/dev/null 2>&1 || true
  done
done
