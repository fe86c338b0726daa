//go:build !windows

package winservice

import (
	"context"
	"io"
)

// Install, Uninstall, Start, Stop and Run are Windows'.

func Install(Service, io.Writer) error            { return ErrNotWindows }
func Uninstall(Service, io.Writer) error          { return ErrNotWindows }
func Start(Service, io.Writer) error              { return ErrNotWindows }
func Stop(Service, io.Writer) error               { return ErrNotWindows }
func Run(context.Context, Service, RunFunc) error { return ErrNotWindows }
