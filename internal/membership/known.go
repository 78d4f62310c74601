package membership

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"slices"
	"strings"

	"github.com/sextantmq/sextant/internal/atomicfile"
)

// KnownMember is another member this node has seen, as remembered in its
// known-members file: a node restarted with any flags (or none) rejoins the
// cluster through them.
type KnownMember struct {
	ID   string `json:"id"`
	Addr string `json:"addr"` // gossip address, ip:port
}

// knownFileFormat is the file's layout; Version lets a later one change it.
type knownFileFormat struct {
	Version int           `json:"version"`
	Members []KnownMember `json:"members"`
}

// maxKnownFile bounds what LoadKnown reads.
const maxKnownFile = 1 << 20

// LoadKnown reads the members remembered at path; a missing file is no
// members.
func LoadKnown(path string) ([]KnownMember, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("membership: known members: %w", err)
	}
	if len(b) > maxKnownFile {
		return nil, fmt.Errorf("membership: known members: %s is larger than %d bytes", path, maxKnownFile)
	}
	var f knownFileFormat
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, fmt.Errorf("membership: known members: %s: %w", path, err)
	}
	if f.Version != 1 {
		return nil, fmt.Errorf("membership: known members: %s: version %d, want 1", path, f.Version)
	}
	return f.Members, nil
}

// known keeps the file of members this node has seen up to date: a member
// is added when it joins (or its address changes) and removed when it is
// reaped (gone long enough, or removed by an operator). Members that failed
// or left stay: they may come back, and a node restarted while they were
// away must still try them. It is used by the event pump alone.
type known struct {
	path    string
	self    string
	log     *slog.Logger
	members map[string]string // id -> gossip address
}

func newKnown(path, self string, log *slog.Logger) *known {
	k := &known{path: path, self: self, log: log, members: map[string]string{}}
	ms, err := LoadKnown(path)
	if err != nil {
		log.Warn("the remembered cluster members could not be read; starting from the current ones", "err", err)
	}
	for _, m := range ms {
		if m.ID != self {
			k.members[m.ID] = m.Addr
		}
	}
	return k
}

// note records what e says about a member, writing the file when the
// remembered set changed.
func (k *known) note(e Event) {
	id := e.Member.ID
	if id == "" || id == k.self {
		return
	}
	switch e.Type {
	case EventReap:
		if _, ok := k.members[id]; !ok {
			return
		}
		delete(k.members, id)
	case EventJoin, EventUpdate, EventLeave, EventFail:
		if k.members[id] == e.Member.Addr || e.Member.Addr == "" {
			return
		}
		k.members[id] = e.Member.Addr
	default:
		return
	}
	if err := k.save(); err != nil {
		k.log.Warn("remembering the cluster members failed; a restart may not find the cluster by itself", "err", err)
	}
}

// save writes the file whole: a crash leaves the old or the new one.
func (k *known) save() error {
	f := knownFileFormat{Version: 1, Members: make([]KnownMember, 0, len(k.members))}
	for id, addr := range k.members {
		f.Members = append(f.Members, KnownMember{ID: id, Addr: addr})
	}
	slices.SortFunc(f.Members, func(a, b KnownMember) int { return strings.Compare(a.ID, b.ID) })
	b, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.Write(k.path, append(b, '\n'), 0o600)
}
