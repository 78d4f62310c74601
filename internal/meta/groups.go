package meta

import (
	"context"
	"errors"
	"fmt"

	"github.com/sextantmq/sextant/internal/meta/fsm"
)

// Placement-group records: proposals that wait until this node's copy
// holds their effect, so a caller may read State() right after. Reads are
// State().Group, Groups, GroupsByHome and GroupLoad.

// CreateGroup records a new placement group (fsm.CreateGroup). If the
// group exists already (another access node created it first, or an
// earlier attempt with an unknown outcome did), it returns the existing
// record and created false: the caller routes to that record's home. On
// ErrUnknownOutcome, call again.
func (m *Meta) CreateGroup(ctx context.Context, g fsm.Group) (rec fsm.Group, created bool, err error) {
	res, err := m.proposeGroup(ctx, fsm.CreateGroup(g))
	if errors.Is(err, fsm.ErrConflict) && res.Group != nil {
		return *res.Group, false, nil
	}
	if err != nil {
		return fsm.Group{}, false, err
	}
	return *res.Group, true, nil
}

// SetGroupHome moves a group's home (fsm.SetGroupHome) and returns the new
// record. A stale epoch is an error wrapping fsm.ErrConflict, and rec is
// then the current record.
func (m *Meta) SetGroupHome(ctx context.Context, c fsm.HomeChange) (rec fsm.Group, err error) {
	return m.changeGroup(ctx, fsm.SetGroupHome(c))
}

// SetGroupMembers replaces a group's voters and learners
// (fsm.SetGroupMembers) and returns the new record; on a conflict (the
// epoch moved, the home was dropped) rec is the current record.
func (m *Meta) SetGroupMembers(ctx context.Context, c fsm.MembersChange) (rec fsm.Group, err error) {
	return m.changeGroup(ctx, fsm.SetGroupMembers(c))
}

// DeleteGroup removes a group's record; fsm.ErrNotFound if there is none.
func (m *Meta) DeleteGroup(ctx context.Context, id string) error {
	_, err := m.proposeGroup(ctx, fsm.DeleteGroup(id))
	return err
}

func (m *Meta) changeGroup(ctx context.Context, cmd fsm.Command) (fsm.Group, error) {
	res, err := m.proposeGroup(ctx, cmd)
	if res.Group == nil {
		return fsm.Group{}, err
	}
	return *res.Group, err
}

// proposeGroup proposes cmd and waits until this node's copy has applied
// it, whether the state machine took it or refused it (a refusal is also
// an entry of the log). A group command that the state machine took always
// carries the record, except delete.
func (m *Meta) proposeGroup(ctx context.Context, cmd fsm.Command) (fsm.Result, error) {
	res, err := m.Propose(ctx, cmd)
	var fe *fsm.Error
	if err != nil && !errors.As(err, &fe) {
		return fsm.Result{}, err // not applied, or outcome unknown
	}
	if werr := m.Wait(ctx, res.Index); werr != nil {
		return fsm.Result{}, werr
	}
	if err == nil && cmd.Op != fsm.OpDeleteGroup && res.Group == nil {
		return res, fmt.Errorf("meta: %s: the leader sent no record", cmd.Op)
	}
	return res, err
}
