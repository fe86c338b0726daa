package storagetest

import (
	"context"
	"sync"

	"github.com/backupcycle/backupcycle/internal/storage"
)

// Hold holds the first Replace of a record (a manifest, a chain or proof
// record) that Match accepts when it comes, as a write left hanging by an
// activity a heartbeat timeout cut: Reached is closed when it arrives, and
// it lands on the server once Release is called, whatever became of its
// context. With Fail set it fails at once with Fail instead and never
// reaches the server.
type Hold struct {
	Match   func(newName string) bool
	Fail    error
	Reached chan struct{}

	mu       sync.Mutex
	held     bool
	released chan struct{}
}

// NewHold holds the first Replace match accepts.
func NewHold(match func(newName string) bool, fail error) *Hold {
	return &Hold{Match: match, Fail: fail, Reached: make(chan struct{}), released: make(chan struct{})}
}

// Release lets the held write land.
func (h *Hold) Release() { close(h.released) }

// Wrap is st with its Replace held by h.
func (h *Hold) Wrap(st storage.Storage) storage.Storage { return holding{Storage: st, h: h} }

type holding struct {
	storage.Storage
	h *Hold
}

func (s holding) Replace(ctx context.Context, oldName, newName string) error {
	h := s.h
	h.mu.Lock()
	hold := !h.held && h.Match(newName)
	if hold {
		h.held = true
	}
	h.mu.Unlock()
	switch {
	case hold && h.Fail != nil:
		return h.Fail
	case hold:
		close(h.Reached)
		<-h.released
		return s.Storage.Replace(context.WithoutCancel(ctx), oldName, newName)
	}
	return s.Storage.Replace(ctx, oldName, newName)
}
