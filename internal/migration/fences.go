package migration

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/sextantmq/sextant/internal/atomicfile"
	"github.com/sextantmq/sextant/internal/meta/fsm"
	"github.com/sextantmq/sextant/internal/replication"
)

// Fence records. Once a handover's switch commits the group is the
// target's, whose log must be completed by this node: an old home that
// restarted after proposing the switch, before the target had the tail,
// would otherwise neither take the group's publishes safely (the target
// may be serving, or will once it has a log) nor know it must still send
// the log. So before it proposes the switch (outside the pause) the old
// home records, durably, the switch's epoch and target; a restarted node
// reads the records before its home side serves anything, fences those
// groups again, holds their replicas open, and settles each (Recover): it
// proposes the record unchanged at that epoch, and the record says whose
// the group is (this node's: the fence is lifted; the target's: the log
// is handed over again). The record is removed once the fence is lifted
// (the switch did not commit) or turned into a redirect (the target
// serves). A handover whose tail failed after the switch is settled the
// same way, without a restart.

// fenceRecord is one group's record (a JSON file named after the group).
type fenceRecord struct {
	Group  string     `json:"group"`
	To     string     `json:"to"`
	Epoch  uint64     `json:"epoch"`
	Reason fsm.Reason `json:"reason"`
}

func fenceFile(dir, group string) string {
	return filepath.Join(dir, replication.GroupID(group).DirName()+".fence")
}

// writeFence records f durably (the file and its directory synced).
func writeFence(dir string, f fenceRecord) error {
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return fmt.Errorf("migration: fence record: %w", err)
	}
	b, err := json.Marshal(f)
	if err != nil {
		return fmt.Errorf("migration: fence record: %w", err)
	}
	if err := atomicfile.Write(fenceFile(dir, f.Group), b, 0o640); err != nil {
		return fmt.Errorf("migration: fence record: %w", err)
	}
	return nil
}

// removeFence drops group's record (none: nothing to do).
func removeFence(dir, group string) error {
	if err := os.Remove(fenceFile(dir, group)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("migration: fence record: %w", err)
	}
	return nil
}

// readFences returns the records in dir (none if it does not exist).
func readFences(dir string) ([]fenceRecord, error) {
	names, err := filepath.Glob(filepath.Join(dir, "*.fence"))
	if err != nil {
		return nil, fmt.Errorf("migration: fence records: %w", err)
	}
	var out []fenceRecord
	for _, n := range names {
		b, err := os.ReadFile(n)
		if err != nil {
			return nil, fmt.Errorf("migration: fence records: %w", err)
		}
		var f fenceRecord
		if err := json.Unmarshal(b, &f); err != nil || f.Group == "" || f.To == "" || f.Epoch < 2 {
			return nil, fmt.Errorf("migration: fence record %s does not decode: %w", n, errors.Join(err, ErrCorrupt))
		}
		out = append(out, f)
	}
	return out, nil
}
