package local_test

import (
	"context"
	"errors"
	"testing"

	"github.com/backupcycle/backupcycle/internal/storage"
	"github.com/backupcycle/backupcycle/internal/storage/local"
	"github.com/backupcycle/backupcycle/internal/storage/storagetest"
)

func TestConformance(t *testing.T) {
	dir := t.TempDir()
	storagetest.Run(t, func(t *testing.T) storage.Storage {
		s, err := local.Open(context.Background(), dir)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}, storagetest.Options{Dir: dir})
}

func TestOpenMissingDir(t *testing.T) {
	_, err := local.Open(context.Background(), t.TempDir()+"/missing")
	if !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("Open of a missing directory: %v, want ErrNotFound", err)
	}
}
