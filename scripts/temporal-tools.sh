#!/usr/bin/env bash
# Builds the Temporal programs of the production-shaped stack (`make stack`) into .cache/tools/temporal/ and prints
# that directory: the server (temporal-server, go.temporal.io/server/cmd/server), its schema tool (temporal-sql-tool)
# and the Web UI server (ui-server), the `tool` lines of go.mod, so from the product's own module graph: the releases
# the tests embed and the compose file's images run, compiled into the same build cache as the tests (after
# `make test`, only their main packages are left to compile and link). Beside them: the server image's entrypoint
# (docker/scripts/sh/entrypoint.sh), the PostgreSQL schema of that release (schema/postgresql/v12, the admin-tools
# image's /etc/temporal/schema) and the Web UI image's configuration template (config/docker.yaml).
#
# The Temporal CLI (temporal, which deploy/temporal/setup-namespace.sh runs) comes from the module tools/temporalcli:
# the newest CLI release that builds from the Go module proxy alone (v1.5.1) links an older server release, which the
# product's module graph cannot hold; the modules it shares with the product are at the product's versions, so most of
# its packages come from the same build cache. It is built once per release (keyed by that module's go.sum and the Go
# version) into .cache/tools/temporalcli-<hash>/.
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
# No DWARF: smaller programs, shorter links; panics still print full stack traces.
ldflags=-w
dir=.cache/tools/temporal
clihash=$({ cat tools/temporalcli/go.sum; printf %s "$($GO env GOVERSION)"; } | sha256sum | cut -c1-16)
cli=.cache/tools/temporalcli-$clihash
mkdir -p .cache/tools
exec 9>.cache/tools/.lock-temporal
flock 9

# go build leaves an output whose build ID is current untouched, so a later run costs seconds. The server and the UI
# server are both package "server": two invocations, the second compiling only what the first did not.
mkdir -p "$dir/bin"
if [ ! -x "$dir/bin/server" ]; then
  echo "temporal tools: building the Temporal server, schema tool and Web UI server (from the tests' build cache)" >&2
fi
nice -n 10 $GO build -mod=readonly -ldflags=$ldflags -o "$dir/bin/" go.temporal.io/server/cmd/server go.temporal.io/server/cmd/tools/sql
nice -n 10 $GO build -mod=readonly -ldflags=$ldflags -o "$dir/bin/ui-server" github.com/temporalio/ui-server/v2/cmd/server
ln -sfn bin/server "$dir/temporal-server"
ln -sfn bin/sql "$dir/temporal-sql-tool"
ln -sfn bin/ui-server "$dir/ui-server"

# The CLI after the server, not beside it: the modules they share are then compiled once, by the first.
if [ ! -x "$cli/temporal" ]; then
  echo "temporal tools: building the Temporal CLI (once per CLI release)" >&2
  rm -rf "$cli.tmp"
  mkdir -p "$cli.tmp"
  nice -n 10 $GO build -C tools/temporalcli -mod=readonly -ldflags=$ldflags -o "$PWD/$cli.tmp/temporal" github.com/temporalio/cli/cmd/temporal
  mv "$cli.tmp" "$cli"
fi
ln -sfn "$PWD/$cli/temporal" "$dir/temporal"

server=$($GO list -mod=readonly -m -f '{{.Dir}}' go.temporal.io/server)
ui=$($GO list -mod=readonly -m -f '{{.Dir}}' github.com/temporalio/ui-server/v2)
rm -rf "$dir/schema" "$dir/ui"
mkdir -p "$dir/schema/postgresql" "$dir/ui/config"
rm -f "$dir/entrypoint.sh"
cp "$server/docker/scripts/sh/entrypoint.sh" "$dir/entrypoint.sh"
cp -R "$server/schema/postgresql/v12" "$dir/schema/postgresql/v12"
cp "$ui/config/docker.yaml" "$dir/ui/config/docker.yaml"
chmod -R u+w "$dir/schema" "$dir/ui" "$dir/entrypoint.sh"

echo "$PWD/$dir"
