package directory

import (
	"context"
	"fmt"
)

// The owner and holder sides of the directory's requests: what Serve runs
// for a request from another node (or this one, when it is the owner).

// Serve answers a directory request from node (Peers.Call on node's side).
func (d *Service) Serve(ctx context.Context, node string, method byte, body []byte) ([]byte, error) {
	switch method {
	case methodRegister:
		cl, err := decodeClaim(body)
		if err != nil {
			return nil, err
		}
		return appendPrevious(nil, d.register(cl)), nil
	case methodRegisterClean:
		cl, err := decodeClaim(body)
		if err != nil {
			return nil, err
		}
		prev, superseded := d.registerClean(cl)
		return appendRegistered(nil, prev, superseded), nil
	case methodAssert:
		holder, ids, stamps, err := decodeAssert(body)
		if err != nil {
			return nil, err
		}
		return appendStringList(nil, d.assert(holder, ids, stamps)), nil
	case methodUnregister:
		cl, err := decodeClaim(body)
		if err != nil {
			return nil, err
		}
		d.unregister(cl)
		return nil, nil
	case methodDrop:
		cl, err := decodeClaim(body)
		if err != nil {
			return nil, err
		}
		d.drop(cl)
		return nil, nil
	case methodHandOver:
		id, clean, err := decodeHandOver(body)
		if err != nil {
			return nil, err
		}
		if clean {
			if _, err := d.sessions.HandOver(id, true); err != nil {
				return nil, fmt.Errorf("directory: hand-over of %q: %w", id, err)
			}
			return nil, nil
		}
		return d.export(node, id)
	case methodRelease:
		id, err := decodeClientID(body)
		if err != nil {
			return nil, err
		}
		d.release(node, id)
		return nil, nil
	case methodSettle:
		id, err := decodeClientID(body)
		if err != nil {
			return nil, err
		}
		return d.settled(id), nil
	case methodRestore:
		mine, prev, err := decodeRestore(body)
		if err != nil {
			return nil, err
		}
		d.restore(mine, prev)
		return nil, nil
	}
	return nil, fmt.Errorf("%w: unknown method %d from %s", ErrCorrupt, method, node)
}

// restore puts prev back as the directory entry if mine is still current.
func (d *Service) restore(mine, prev claim) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if cur := d.mu.entries[mine.ClientID]; cur.node != mine.Node || cur.stamp != mine.Stamp {
		return
	}
	if prev.Node == "" {
		delete(d.mu.entries, mine.ClientID)
		return
	}
	d.mu.entries[mine.ClientID] = holding{node: prev.Node, stamp: prev.Stamp}
}

// export answers a hand-over request from node: the session's snapshot,
// kept here until node releases it.
func (d *Service) export(node, clientID string) ([]byte, error) {
	st, err := d.sessions.ExportSession(clientID)
	if err != nil {
		return nil, fmt.Errorf("cluster: hand-over of %q: %w", clientID, err)
	}
	if st == nil {
		return nil, nil
	}
	st.MovedTo = node
	d.mu.Lock()
	d.mu.handing[clientID] = handing{to: node, st: st, at: d.clock.Now()}
	d.metrics.moving.Set(float64(len(d.mu.handing)))
	d.mu.Unlock()
	return appendState(nil, st), nil
}

// release ends a session exported to node, which now has it.
func (d *Service) release(node, clientID string) {
	d.mu.Lock()
	h, ok := d.mu.handing[clientID]
	if ok && h.to == node {
		delete(d.mu.handing, clientID)
		d.metrics.moving.Set(float64(len(d.mu.handing)))
	}
	d.mu.Unlock()
	if !ok || h.to != node {
		return
	}
	d.sessions.ReleaseSession(h.st)
	d.metrics.handOversOut.Inc()
}

// settled answers a holder's methodSettle: 0 if the session is held here
// (the hand-over arrived and only its release was lost), 1 if not (it was
// abandoned, or has ended here since): the holder keeps its copy.
func (d *Service) settled(clientID string) []byte {
	if d.sessions.HoldsSession(clientID) {
		return []byte{0}
	}
	return []byte{1}
}

// register records a CONNECT's claim (it beats every earlier one) and
// returns the claim it replaced (Node "" if none).
func (d *Service) register(cl claim) claim {
	d.hlc.Observe(cl.Stamp)
	d.mu.Lock()
	defer d.mu.Unlock()
	prev := d.mu.entries[cl.ClientID]
	d.mu.entries[cl.ClientID] = holding{node: cl.Node, stamp: cl.Stamp}
	return claim{ClientID: cl.ClientID, Node: prev.node, Stamp: prev.stamp}
}

// registerClean records a clean start's claim, registered after its
// CONNECT was answered, unless a newer claim got there first (superseded).
func (d *Service) registerClean(cl claim) (prev claim, superseded bool) {
	d.hlc.Observe(cl.Stamp)
	d.mu.Lock()
	defer d.mu.Unlock()
	cur, ok := d.mu.entries[cl.ClientID]
	if ok && cur.stamp > cl.Stamp {
		return claim{}, true
	}
	d.mu.entries[cl.ClientID] = holding{node: cl.Node, stamp: cl.Stamp}
	return claim{ClientID: cl.ClientID, Node: cur.node, Stamp: cur.stamp}, false
}

// assert re-registers sessions a holder already has. A claim loses to a
// newer one of another alive node (it is returned as superseded); a claim
// that beats the entry's alive holder replaces it, and that holder is told
// to drop its stale copy.
func (d *Service) assert(holder string, ids []string, stamps []uint64) (superseded []string) {
	alive := d.aliveNodes()
	aliveSet := make(map[string]bool, len(alive))
	for _, n := range alive {
		aliveSet[n] = true
	}
	var drops []claim
	d.mu.Lock()
	for i, id := range ids {
		d.hlc.Observe(stamps[i])
		cur, ok := d.mu.entries[id]
		switch {
		case !ok || cur.node == holder || !aliveSet[cur.node]:
		case stamps[i] > cur.stamp:
			drops = append(drops, claim{ClientID: id, Node: cur.node, Stamp: cur.stamp})
		default:
			superseded = append(superseded, id)
			continue
		}
		d.mu.entries[id] = holding{node: holder, stamp: stamps[i]}
	}
	d.mu.Unlock()
	for _, dr := range drops {
		if dr.Node == d.id {
			d.drop(dr)
		} else {
			d.peers.Notify(dr.Node, methodDrop, appendClaim(nil, dr))
		}
	}
	return superseded
}

// unregister forgets a session if the entry is still that claim.
func (d *Service) unregister(cl claim) {
	d.mu.Lock()
	if cur := d.mu.entries[cl.ClientID]; cur.node == cl.Node && cur.stamp == cl.Stamp {
		delete(d.mu.entries, cl.ClientID)
	}
	d.mu.Unlock()
}

// drop discards the local session named by a superseded claim, unless it
// was claimed again since.
func (d *Service) drop(cl claim) {
	d.mu.Lock()
	ls, ok := d.mu.local[cl.ClientID]
	d.mu.Unlock()
	if ok && ls.stamp == cl.Stamp {
		d.discard(cl.ClientID)
	}
}
