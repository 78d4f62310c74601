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
	"github.com/sextantmq/sextant/internal/netx"
)

// Forwarded request ops.
const (
	opPropose      = "propose"
	opAddVoter     = "add_voter"
	opAddNonvoter  = "add_nonvoter"
	opRemoveServer = "remove_server"
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

// serveForward executes one forwarded request, if this node leads.
func (m *Meta) serveForward(ctx context.Context, c net.Conn) {
	defer c.Close()
	stop := context.AfterFunc(ctx, func() { _ = c.Close() })
	defer stop()
	_ = c.SetDeadline(time.Now().Add(helloTimeout))
	var req request
	if err := readFrame(c, &req); err != nil {
		m.logger.Debug("meta: read forwarded request", "err", err)
		return
	}
	timeout := forwardTimeout
	if req.TimeoutMS > 0 {
		timeout = min(timeout, time.Duration(req.TimeoutMS)*time.Millisecond)
	}
	_ = c.SetDeadline(time.Now().Add(timeout + helloTimeout))
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	resp := m.execute(ctx, req)
	if err := writeFrame(c, resp); err != nil {
		m.logger.Debug("meta: write forwarded response", "err", err)
	}
}

// execute runs a request locally if this node is the leader.
func (m *Meta) execute(ctx context.Context, req request) response {
	if !m.IsLeader() {
		_, addr := m.Leader()
		return response{Code: codeNotLeader, Leader: addr}
	}
	var (
		res *fsm.Result
		err error
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
	default:
		return response{Code: codeFailed, Error: fmt.Sprintf("unknown op %q", req.Op)}
	}
	switch {
	case err == nil:
		return response{Result: res}
	case errors.Is(err, ErrNotLeader):
		_, addr := m.Leader()
		return response{Code: codeNotLeader, Leader: addr}
	case errors.Is(err, ErrUnknownOutcome):
		return response{Code: codeUnknownOutcome, Error: err.Error()}
	}
	return response{Code: codeFailed, Error: err.Error()}
}

// forward sends req to addr and returns the response. A request that could
// not be sent (dial or write failure) comes back as errNotSent, safe to
// retry; a failure after it was sent is ErrUnknownOutcome.
func (m *Meta) forward(ctx context.Context, addr string, req request) (response, error) {
	if d, ok := ctx.Deadline(); ok {
		req.TimeoutMS = max(1, time.Until(d).Milliseconds())
	}
	c, err := m.cfg.Dial(ctx, addr)
	if err != nil {
		return response{}, fmt.Errorf("%w: dial %s: %w", errNotSent, addr, err)
	}
	defer c.Close()
	stop := context.AfterFunc(ctx, func() { _ = c.Close() })
	defer stop()
	if d, ok := ctx.Deadline(); ok {
		_ = c.SetDeadline(d)
	}
	if _, err := c.Write([]byte{kindForward}); err != nil {
		return response{}, fmt.Errorf("%w: %s: %w", errNotSent, addr, err)
	}
	sc, err := netx.Secure(ctx, c, m.cfg.TLS, false) // c stays the raw connection the closers above hold
	if err != nil {
		return response{}, fmt.Errorf("%w: %s: %w", errNotSent, addr, err)
	}
	if err := writeFrame(sc, req); err != nil {
		return response{}, fmt.Errorf("%w: %s: %w", errNotSent, addr, err)
	}
	var resp response
	if err := readFrame(sc, &resp); err != nil {
		if ctx.Err() != nil {
			err = ctx.Err()
		}
		return response{}, fmt.Errorf("%w: no answer from %s: %w", ErrUnknownOutcome, addr, err)
	}
	return resp, nil
}

// errNotSent marks a forward that never reached the other side.
var errNotSent = errors.New("meta: request not sent")
