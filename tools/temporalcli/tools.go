//go:build tools

// Package tools pins the Temporal CLI that deploy/temporal/setup-namespace.sh
// and register-search-attributes.sh run in the production-shaped stack
// (`make stack`). It is the one Temporal program of the stack built outside
// the product's module graph: the newest CLI release that builds from the Go
// module proxy alone (v1.5.1; the later ones require a nested module that is
// not published, replaced by a local directory that `go build` of a
// dependency cannot follow) links an older server release, which the
// product's graph cannot hold. The CLI only talks to the server over gRPC.
// Every other module it shares with the product is raised to the product's
// version (TestCLISharesProductVersions), so that a build cache `make test`
// filled already holds most of its packages.
package tools

import _ "github.com/temporalio/cli/cmd/temporal"
