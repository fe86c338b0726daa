//go:build !windows

package local

import "syscall"

// noBlock keeps an open of a FIFO, swapped in after its Lstat, from
// waiting for a writer; it changes nothing for regular files.
const noBlock = syscall.O_NONBLOCK
