#!/usr/bin/env bash
# Installs what the tests need when it is missing: Samba (smbd, smbpasswd), smbclient (the reference client the
# storage benchmarks compare against), nss_wrapper (so a private smbd can have its own user without touching
# /etc/passwd), uid_wrapper (so a user other than root can run that smbd: the demo's site as a normal user, and the
# test that starts it as one), promtool (Debian's prometheus package: the tests check the alert rules with it),
# chromium (the screenshot tool's tests drive it headless), FreeTDS's tsql (freetds-bin: a TDS client independent
# of go-mssqldb that the emulator's tests talk to) and systemd-analyze (the systemd package: the worker's unit is
# verified and scored with it; no systemd needs to run), Wine (`make test-windows`: its services.exe is the Service
# Control Manager the worker's Windows service mode is driven through) and the MinGW-w64 binutils (their dlltool and ld
# link the one-export bcryptprimitives.dll that test gives Wine 8, which lacks the ProcessPrng every Go 1.24+ program
# calls at start). Idempotent: does nothing when everything is there.
set -euo pipefail

need=()
command -v smbd >/dev/null 2>&1 || [ -x /usr/sbin/smbd ] || need+=(samba)
command -v smbclient >/dev/null 2>&1 || need+=(smbclient)
ls /usr/lib/*/libnss_wrapper.so >/dev/null 2>&1 || need+=(libnss-wrapper)
ls /usr/lib/*/libuid_wrapper.so >/dev/null 2>&1 || need+=(libuid-wrapper)
command -v promtool >/dev/null 2>&1 || need+=(prometheus)
command -v chromium >/dev/null 2>&1 || need+=(chromium)
command -v tsql >/dev/null 2>&1 || need+=(freetds-bin)
command -v systemd-analyze >/dev/null 2>&1 || need+=(systemd)
command -v wine >/dev/null 2>&1 || need+=(wine wine64)
command -v x86_64-w64-mingw32-dlltool >/dev/null 2>&1 || need+=(binutils-mingw-w64-x86-64)

if [ ${#need[@]} -eq 0 ]; then
  exit 0
fi

echo "test-deps: installing ${need[*]}" >&2
SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
# The samba and prometheus packages start system daemons on install on some images; the tests run their own private
# smbd on loopback ports and only need promtool. A Prometheus server left running would also hold port 9090.
for svc in smbd nmbd samba-ad-dc; do
  $SUDO systemctl stop "$svc" >/dev/null 2>&1 || true
done
$SUDO systemctl disable --now prometheus >/dev/null 2>&1 || true
