#!/usr/bin/env bash
# Builds versitygw, the S3 server with Object Lock the tests of the object-storage backup target run on 127.0.0.1,
# from the separate module tools/versitygw (its dependencies stay out of the product's go.mod), into
# .cache/tools/versitygw-<hash>: the hash is of tools/versitygw/go.sum and the Go version, so an unchanged version is
# never built again (about a minute on 2 cores the first time). internal/s3test finds it there by the same name, and
# runs this script itself when it is missing. Prints the binary's path.
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
hash=$({ cat tools/versitygw/go.sum; printf %s "$($GO env GOVERSION)"; } | sha256sum | cut -c1-16)
bin=.cache/tools/versitygw-$hash
mkdir -p .cache/tools
exec 9>.cache/tools/.lock
flock 9
if [ ! -x "$bin" ]; then
  echo "versitygw: building it from tools/versitygw (once per version, about a minute)" >&2
  nice -n 10 $GO build -C tools/versitygw -mod=readonly -trimpath -o "$PWD/$bin.tmp" github.com/versity/versitygw/cmd/versitygw
  mv "$bin.tmp" "$bin"
fi
echo "$PWD/$bin"
