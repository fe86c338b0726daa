//go:build !windows

package local

import (
	"context"
	"errors"

	"golang.org/x/sys/unix"
)

// FreeSpace is what the directory's file system has free for this user.
func (s *Storage) FreeSpace(ctx context.Context) (int64, bool, error) {
	if err := ctx.Err(); err != nil {
		return 0, false, err
	}
	var st unix.Statfs_t
	if err := unix.Statfs(s.dir, &st); err != nil {
		return 0, false, s.err("statfs", "", err)
	}
	return int64(st.Bavail) * int64(st.Bsize), true, nil
}

// isNoSpace tells a full file system or an exhausted quota.
func isNoSpace(err error) bool {
	return errors.Is(err, unix.ENOSPC) || errors.Is(err, unix.EDQUOT)
}
