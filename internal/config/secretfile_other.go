//go:build !unix

package config

import (
	"io/fs"
	"os"
)

// openSecretFile opens path for reading.
func openSecretFile(path string) (*os.File, error) { return os.Open(path) }

// checkSecretFileAccess checks nothing: on Windows who may read a file is
// its ACL, which Go's file modes do not show. Restrict the file to the
// worker's account yourself (README, "Security model").
func checkSecretFileAccess(string, string, fs.FileInfo) error { return nil }
