//go:build !unix

package storagetest

import "errors"

func mkfifo(string) error { return errors.New("storagetest: FIFOs need a Unix system") }
