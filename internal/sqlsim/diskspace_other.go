//go:build !unix

package sqlsim

// diskSpace reports a file system of 1 TiB with half of it free where the
// emulator cannot ask the operating system; tests that need exact figures
// give the volume a quota (SetShareQuota).
func diskSpace(dir string) (total, available int64) { return 1 << 40, 1 << 39 }
