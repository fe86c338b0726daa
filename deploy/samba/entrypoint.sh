#!/bin/sh
# Starts the backup server's smbd in the foreground with the user "backup" (uid 10001, the mssql user of the
# SQL Server containers, so that files written by SQL Server through the shared volume and by the worker over
# SMB belong to the same owner).
set -eu
if [ -z "${SMB_PASSWORD:-}" ]; then
  echo "backup server: SMB_PASSWORD is not set: start this through deploy/secret-env.sh with the server's secret (deploy/make-secrets.sh writes it)" >&2
  exit 1
fi
if ! id backup >/dev/null 2>&1; then
  groupadd --gid 10001 backup
  useradd --uid 10001 --gid 10001 --no-create-home --shell /usr/sbin/nologin backup
fi
mkdir -p /srv/backup
chown backup:backup /srv/backup
chmod 0775 /srv/backup
printf '%s\n%s\n' "$SMB_PASSWORD" "$SMB_PASSWORD" | smbpasswd -s -a backup >/dev/null
exec smbd --foreground --no-process-group --debug-stdout
