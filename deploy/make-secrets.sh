#!/bin/sh
# make-secrets.sh [DIR]: writes one random password per compose secret into DIR (default deploy/secrets/, which git
# ignores), each file on its own so that docker-compose.yml can give every service only the secrets it uses. The
# worker's manifest key (manifest_key) is one of them: 36 characters holding 128 random bits, enough for HMAC-SHA256.
#
# An existing file is kept: SQL Server and PostgreSQL take their password on the first start of an empty volume,
# so a new value would no longer match. To change one, change it in the service first, then in its file; or start
# over with `docker compose down -v` and a new DIR.
#
# The directory is 0700 (only you, on the host); the files are 0644 because compose mounts them as they are into
# containers whose processes run as other users (mssql, postgres, temporal, nonroot).
set -eu

dir="${1:-$(dirname "$0")/secrets}"
names="postgres_password sql_primary_sa_password sql_verify_sa_password sql_primary_backupcycle_password sql_verify_backupcycle_password bak01_smb_password bak02_smb_password manifest_key"

# 16 random bytes as hex, behind a fixed prefix that gives SQL Server's policy its upper case, lower case, digit and
# symbol whatever the random part holds.
random_password() {
  printf 'Bk7-%s\n' "$(od -An -tx1 -N16 /dev/urandom | tr -d ' \n')"
}

mkdir -p "$dir"
chmod 0700 "$dir"
for name in $names; do
  f="$dir/$name"
  if [ -s "$f" ]; then
    echo "kept    $f"
    continue
  fi
  (umask 077 && random_password >"$f")
  chmod 0644 "$f"
  echo "created $f"
done
