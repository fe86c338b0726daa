//go:build tools

// Package tools pins the Temporal CLI that deploy/temporal/setup-namespace.sh
// and register-search-attributes.sh run in the production-shaped stack
// (`make stack`). It is a module of its own, apart from tools/temporal: the
// newest CLI release that builds from the Go module proxy alone (v1.5.1; the
// later ones replace a nested module by a local directory, which `go build`
// of a dependency cannot follow) requires an older server release than the
// one the stack runs, and the CLI only talks to the server over gRPC.
package tools

import _ "github.com/temporalio/cli/cmd/temporal"
