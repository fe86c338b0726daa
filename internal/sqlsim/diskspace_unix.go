//go:build unix

package sqlsim

import "golang.org/x/sys/unix"

// diskSpace is the size and the space available to this process of the
// file system holding dir; both 0 when it cannot be read.
func diskSpace(dir string) (total, available int64) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return 0, 0
	}
	return int64(st.Blocks) * int64(st.Bsize), int64(st.Bavail) * int64(st.Bsize)
}
