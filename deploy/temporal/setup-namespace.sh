#!/bin/sh
# Creates the namespace backupcycle uses (the server image, unlike the retired auto-setup image, creates none) and
# registers the product's search attributes on it. Run by the one-shot compose service temporal-namespace once the
# server is healthy. Idempotent.
# Environment: TEMPORAL_ADDRESS (default temporal:7233), TEMPORAL_NAMESPACE (default "default"),
# NAMESPACE_RETENTION (how long closed workflow histories are kept, default 30d).
set -eu
addr="${TEMPORAL_ADDRESS:-temporal:7233}"
ns="${TEMPORAL_NAMESPACE:-default}"
retention="${NAMESPACE_RETENTION:-30d}"

tries=0
until temporal operator cluster health --address "$addr" >/dev/null 2>&1; do
  tries=$((tries + 1))
  if [ "$tries" -ge 90 ]; then
    echo "namespace: Temporal at $addr not healthy after 180s: check the temporal service's logs" >&2
    exit 1
  fi
  sleep 2
done

if temporal operator namespace describe --address "$addr" --namespace "$ns" >/dev/null 2>&1; then
  echo "namespace $ns already exists"
else
  temporal operator namespace create --address "$addr" --namespace "$ns" --retention "$retention"
  echo "namespace $ns created (retention $retention)"
fi

exec sh "$(dirname "$0")/register-search-attributes.sh"
