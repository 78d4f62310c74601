// Package logtest gives tests a logger whose output they read while the
// code under test writes it: what a node, a membership or a cluster layer
// logs is checked through it. A Buffer is safe for concurrent use (one
// mutex). It is imported only by tests and other test harnesses.
package logtest

import (
	"bytes"
	"log/slog"
	"sync"
)

// Buffer is an output a test reads while others write it.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p.
func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

// String returns what was written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// New returns a text logger at level writing to a new Buffer.
func New(level slog.Level) (*slog.Logger, *Buffer) {
	buf := &Buffer{}
	return slog.New(slog.NewTextHandler(buf, &slog.HandlerOptions{Level: level})), buf
}
