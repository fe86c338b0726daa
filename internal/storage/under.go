package storage

import (
	"context"
	"strings"
)

// Under is the directory dir (slash-separated, relative) of st as a
// Storage of its own: every name is taken relative to dir, and List
// returns names relative to it. A listing of st's own directory never
// shows what is under dir (List does not recurse), which keeps files
// staged there out of every listing of the sets beside it.
func Under(st Storage, dir string) Storage {
	return &under{Storage: st, dir: strings.Trim(dir, "/") + "/"}
}

type under struct {
	Storage
	dir string
}

func (u *under) Location() string { return u.Storage.Location() + "/" + strings.TrimSuffix(u.dir, "/") }

func (u *under) Stat(ctx context.Context, name string) (FileInfo, error) {
	fi, err := u.Storage.Stat(ctx, u.dir+name)
	fi.Name = strings.TrimPrefix(fi.Name, u.dir)
	return fi, err
}

func (u *under) OpenRead(ctx context.Context, name string) (Reader, error) {
	return u.Storage.OpenRead(ctx, u.dir+name)
}

func (u *under) Create(ctx context.Context, name string) (Writer, error) {
	return u.Storage.Create(ctx, u.dir+name)
}

func (u *under) OpenWrite(ctx context.Context, name string) (Writer, error) {
	return u.Storage.OpenWrite(ctx, u.dir+name)
}

func (u *under) List(ctx context.Context, prefix, suffix string) ([]FileInfo, error) {
	files, err := u.Storage.List(ctx, u.dir+prefix, suffix)
	for i := range files {
		files[i].Name = strings.TrimPrefix(files[i].Name, u.dir)
	}
	return files, err
}

func (u *under) Rename(ctx context.Context, oldName, newName string) error {
	return u.Storage.Rename(ctx, u.dir+oldName, u.dir+newName)
}

func (u *under) Replace(ctx context.Context, oldName, newName string) error {
	return u.Storage.Replace(ctx, u.dir+oldName, u.dir+newName)
}

func (u *under) Remove(ctx context.Context, name string) error {
	return u.Storage.Remove(ctx, u.dir+name)
}
