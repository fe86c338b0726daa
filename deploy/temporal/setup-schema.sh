#!/bin/sh
# Creates or upgrades Temporal's two PostgreSQL databases (persistence and visibility) with the schema tool of the
# admin-tools image, as Temporal documents for its server image (which, unlike the retired auto-setup image, never
# touches the schema itself). Run by the one-shot compose service temporal-schema before the server starts.
# Idempotent: `create-database` fails harmlessly when the database exists (a real connection or password problem
# fails setup-schema right after it, which stops the script), setup-schema only adds the version tables, and
# update-schema applies the versions not yet applied.
# Environment: POSTGRES_SEEDS (host), DB_PORT, POSTGRES_USER, SQL_PASSWORD (read by temporal-sql-tool itself).
set -eu
: "${POSTGRES_SEEDS:?set POSTGRES_SEEDS to the PostgreSQL host}"
: "${POSTGRES_USER:?set POSTGRES_USER to the PostgreSQL user}"
: "${SQL_PASSWORD:?SQL_PASSWORD is empty: run this through deploy/secret-env.sh with the postgres_password secret}"
port="${DB_PORT:-5432}"
schema_root="${TEMPORAL_SCHEMA_DIR:-/etc/temporal/schema/postgresql/v12}"

tries=0
until nc -z -w 5 "$POSTGRES_SEEDS" "$port"; do
  tries=$((tries + 1))
  if [ "$tries" -ge 30 ]; then
    echo "temporal schema: PostgreSQL at $POSTGRES_SEEDS:$port not reachable after 60s: check the postgresql service's logs" >&2
    exit 1
  fi
  sleep 2
done

# sql runs the schema tool on database $db.
sql() { temporal-sql-tool --plugin postgres12 --ep "$POSTGRES_SEEDS" -p "$port" -u "$POSTGRES_USER" --db "$db" "$@"; }

for pair in temporal:temporal temporal_visibility:visibility; do
  db="${pair%%:*}"
  dir="$schema_root/${pair#*:}/versioned"
  if sql create-database; then
    echo "temporal schema: database $db created"
  else
    echo "temporal schema: database $db not created (it exists, or the next step says why)"
  fi
  sql setup-schema -v 0.0
  sql update-schema -d "$dir"
  echo "temporal schema: $db is at the newest version in $dir"
done
