//go:build !linux

package replication

import (
	walfs "github.com/hashicorp/raft-wal/fs"
	"github.com/hashicorp/raft-wal/types"
)

// newDirectFS is raft-wal's own file system off Linux: direct I/O
// (direct.go) is used on Linux only.
func newDirectFS() types.VFS { return walfs.New() }
