#!/bin/sh
# Registers backupcycle's custom search attributes on a namespace, with the Temporal CLI. The compose stack runs it
# from setup-namespace.sh (one-shot service temporal-namespace); on another cluster:
#   TEMPORAL_ADDRESS=host:7233 TEMPORAL_NAMESPACE=ns sh deploy/temporal/register-search-attributes.sh
# The list must match the search attributes the workflows declare (checked by deploy's tests). Idempotent.
set -eu
addr="${TEMPORAL_ADDRESS:-temporal:7233}"
ns="${TEMPORAL_NAMESPACE:-default}"

# Waits for the list itself, not for `namespace describe`: a namespace just created is described from the database
# at once, but the server's namespace cache, which the search attribute commands use, has it some seconds later.
tries=0
until existing="$(temporal operator search-attribute list --address "$addr" --namespace "$ns" 2>/dev/null)"; do
  tries=$((tries + 1))
  if [ "$tries" -gt 90 ]; then
    echo "search attributes: namespace $ns at $addr not ready after 180s: check the temporal service's logs" >&2
    temporal operator search-attribute list --address "$addr" --namespace "$ns" >/dev/null
    exit 1
  fi
  sleep 2
done
for attr in BackupDatabase:Keyword BackupInstance:Keyword BackupSequence:Int BackupStep:Keyword BackupServer:Keyword BackupOutcome:Keyword; do
  name="${attr%%:*}"
  type="${attr#*:}"
  if printf '%s\n' "$existing" | grep -qw "$name"; then
    echo "search attribute $name already registered"
    continue
  fi
  temporal operator search-attribute create --address "$addr" --namespace "$ns" --name "$name" --type "$type"
  echo "search attribute $name ($type) registered"
done
