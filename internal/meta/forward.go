package meta

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/sextantmq/sextant/internal/meta/fsm"
)

// Forwarded request ops.
const (
	opPropose      = "propose"
	opAddVoter     = "add_voter"
	opAddNonvoter  = "add_nonvoter"
	opRemoveServer = "remove_server"
	opReadIndex    = "read_index" // the leader's read index (catchup.go)
)

// Response codes of forwarded requests.
const (
	codeNotLeader      = "not_leader"      // not executed; Leader names the leader if known
	codeUnknownOutcome = "unknown_outcome" // may or may not have been applied
	codeFailed         = "failed"          // not applied
)

// maxFrame bounds a forwarded request or response.
const maxFrame = fsm.MaxEncodedBytes + 4096

// forwardTimeout bounds a forwarded request on the serving side when the
// caller sent no deadline.
const forwardTimeout = 30 * time.Second

type request struct {
	Op        string          `json:"op"`
	Cmd       json.RawMessage `json:"cmd,omitempty"` // encoded fsm.Command
	ID        string          `json:"id,omitempty"`
	Addr      string          `json:"addr,omitempty"`
	TimeoutMS int64           `json:"timeout_ms,omitempty"`
}

type response struct {
	Result *fsm.Result `json:"result,omitempty"`
	Code   string      `json:"code,omitempty"`
	Error  string      `json:"error,omitempty"`
	Leader string      `json:"leader,omitempty"`
	Index  uint64      `json:"index,omitempty"` // opReadIndex's answer
}

func writeFrame(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	if len(b) > maxFrame {
		return fmt.Errorf("meta: frame of %d bytes exceeds %d", len(b), maxFrame)
	}
	buf := make([]byte, 4+len(b))
	binary.BigEndian.PutUint32(buf, uint32(len(b)))
	copy(buf[4:], b)
	_, err = w.Write(buf)
	return err
}

func readFrame(r io.Reader, v any) error {
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return err
	}
	n := binary.BigEndian.Uint32(hdr[:])
	if n > maxFrame {
		return fmt.Errorf("meta: frame of %d bytes exceeds %d", n, maxFrame)
	}
	// Read without trusting the header for the allocation: a peer that
	// announces a large frame must also send it.
	b, err := io.ReadAll(io.LimitReader(r, int64(n)))
	if err != nil {
		return err
	}
	if len(b) != int(n) {
		return io.ErrUnexpectedEOF
	}
	return json.Unmarshal(b, v)
}

// serveForward executes the requests forwarded on c, one after another,
// until c breaks, is idle for serveIdle or ctx ends. A client that sends
// one request and closes (Join) is served the same way.
func (m *Meta) serveForward(ctx context.Context, c net.Conn) {
	defer c.Close()
	stop := context.AfterFunc(ctx, func() { _ = c.Close() })
	defer stop()
	for {
		_ = c.SetDeadline(time.Now().Add(serveIdle))
		var req request
		if err := readFrame(c, &req); err != nil {
			if !errors.Is(err, io.EOF) {
				m.logger.Debug("meta: read forwarded request", "err", err)
			}
			return
		}
		timeout := forwardTimeout
		if req.TimeoutMS > 0 {
			timeout = min(timeout, time.Duration(req.TimeoutMS)*time.Millisecond)
		}
		_ = c.SetDeadline(time.Now().Add(timeout + helloTimeout))
		rctx, cancel := context.WithTimeout(ctx, timeout)
		resp := m.execute(rctx, req)
		cancel()
		if err := writeFrame(c, resp); err != nil {
			m.logger.Debug("meta: write forwarded response", "err", err)
			return
		}
	}
}

// execute runs a request locally if this node is the leader.
func (m *Meta) execute(ctx context.Context, req request) response {
	if !m.IsLeader() {
		_, addr := m.Leader()
		return response{Code: codeNotLeader, Leader: addr}
	}
	var (
		res   *fsm.Result
		index uint64
		err   error
	)
	switch req.Op {
	case opPropose:
		var r fsm.Result
		r, err = m.applyLocal(ctx, req.Cmd)
		res = &r
	case opAddVoter:
		err = m.changeLocal(ctx, req.Op, req.ID, req.Addr)
	case opAddNonvoter:
		err = m.changeLocal(ctx, req.Op, req.ID, req.Addr)
	case opRemoveServer:
		err = m.changeLocal(ctx, req.Op, req.ID, "")
	case opReadIndex:
		if m.oldLeader.Load() {
			return response{Code: codeFailed, Error: fmt.Sprintf("unknown op %q", req.Op)}
		}
		index, err = m.readIndexLocal(ctx)
	default:
		return response{Code: codeFailed, Error: fmt.Sprintf("unknown op %q", req.Op)}
	}
	switch {
	case err == nil:
		return response{Result: res, Index: index}
	case errors.Is(err, ErrNotLeader):
		_, addr := m.Leader()
		return response{Code: codeNotLeader, Leader: addr}
	case errors.Is(err, ErrUnknownOutcome):
		return response{Code: codeUnknownOutcome, Error: err.Error()}
	}
	return response{Code: codeFailed, Error: err.Error()}
}

// errNotSent marks a forward that never reached the other side.
var errNotSent = errors.New("meta: request not sent")
