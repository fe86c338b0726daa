//go:build tools

// Package tools pins the Temporal programs of the production-shaped stack
// (`make stack`): the server (go.temporal.io/server/cmd/server), its schema
// tool temporal-sql-tool, the Web UI server and the Temporal CLI that
// deploy/temporal/setup-namespace.sh runs, at the releases of the compose
// file's images and of the server the tests embed. It is a module of its
// own so that their dependencies stay out of the product's go.mod.
package tools

import (
	_ "github.com/temporalio/ui-server/v2/cmd/server"
	_ "go.temporal.io/server/cmd/server"
	_ "go.temporal.io/server/cmd/tools/sql"
)
