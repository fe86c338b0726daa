#!/usr/bin/env bash
# Builds the Temporal programs of the production-shaped stack (`make stack`) into .cache/tools/temporal-<hash>/: the
# server (temporal-server, go.temporal.io/server/cmd/server), its schema tool (temporal-sql-tool), the Web UI server
# (ui-server) from the module tools/temporal, at the releases of the compose file's images, and the Temporal CLI
# (temporal) from tools/temporalcli. Beside them: the server image's entrypoint (docker/scripts/sh/entrypoint.sh),
# the PostgreSQL schema of that release (schema/postgresql/v12, the admin-tools image's /etc/temporal/schema) and the
# Web UI image's configuration template (config/docker.yaml). The hash is of both modules' go.sum and the Go version,
# so an unchanged release is never built again (up to half an hour on 2 busy cores the first time). Prints the directory.
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
hash=$({ cat tools/temporal/go.sum tools/temporalcli/go.sum; printf %s "$($GO env GOVERSION)"; } | sha256sum | cut -c1-16)
dir=.cache/tools/temporal-$hash
mkdir -p .cache/tools
exec 9>.cache/tools/.lock-temporal
flock 9
if [ ! -x "$dir/temporal" ]; then
  echo "temporal tools: building the Temporal server, schema tool, Web UI and CLI (once per release, up to half an hour)" >&2
  rm -rf "$dir.tmp"
  mkdir -p "$dir.tmp/schema/postgresql" "$dir.tmp/ui/config"
  nice -n 10 $GO build -C tools/temporal -mod=readonly -trimpath -o "$PWD/$dir.tmp/temporal-server" go.temporal.io/server/cmd/server
  nice -n 10 $GO build -C tools/temporal -mod=readonly -trimpath -o "$PWD/$dir.tmp/temporal-sql-tool" go.temporal.io/server/cmd/tools/sql
  nice -n 10 $GO build -C tools/temporal -mod=readonly -trimpath -o "$PWD/$dir.tmp/ui-server" github.com/temporalio/ui-server/v2/cmd/server
  nice -n 10 $GO build -C tools/temporalcli -mod=readonly -trimpath -o "$PWD/$dir.tmp/temporal" github.com/temporalio/cli/cmd/temporal
  server=$($GO list -C tools/temporal -mod=readonly -m -f '{{.Dir}}' go.temporal.io/server)
  ui=$($GO list -C tools/temporal -mod=readonly -m -f '{{.Dir}}' github.com/temporalio/ui-server/v2)
  cp "$server/docker/scripts/sh/entrypoint.sh" "$dir.tmp/entrypoint.sh"
  cp -R "$server/schema/postgresql/v12" "$dir.tmp/schema/postgresql/v12"
  cp "$ui/config/docker.yaml" "$dir.tmp/ui/config/docker.yaml"
  chmod -R u+w "$dir.tmp"
  rm -rf "$dir"
  mv "$dir.tmp" "$dir"
fi
echo "$PWD/$dir"
