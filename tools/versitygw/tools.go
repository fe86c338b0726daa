//go:build tools

// Package tools pins versitygw, the S3 server (with Object Lock) the tests
// of the object-storage backup target run on 127.0.0.1. It is a module of
// its own so that versitygw's dependencies stay out of the product's go.mod.
package tools

import _ "github.com/versity/versitygw/cmd/versitygw"
