package local

import (
	"context"
	"errors"

	"golang.org/x/sys/windows"
)

// FreeSpace is what the directory's volume has free for this user (its
// quota included), as GetDiskFreeSpaceEx reports it.
func (s *Storage) FreeSpace(ctx context.Context) (int64, bool, error) {
	if err := ctx.Err(); err != nil {
		return 0, false, err
	}
	dir, err := windows.UTF16PtrFromString(s.dir)
	if err != nil {
		return 0, false, s.err("free space", "", err)
	}
	var avail, total, free uint64
	if err := windows.GetDiskFreeSpaceEx(dir, &avail, &total, &free); err != nil {
		return 0, false, s.err("free space", "", err)
	}
	return int64(avail), true, nil
}

// isNoSpace tells a full disk (ERROR_DISK_FULL from a write,
// ERROR_HANDLE_DISK_FULL from some file APIs).
func isNoSpace(err error) bool {
	return errors.Is(err, windows.ERROR_DISK_FULL) || errors.Is(err, windows.ERROR_HANDLE_DISK_FULL)
}
