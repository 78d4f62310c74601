package peer

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"reflect"
	"testing"
)

// allFrames is one frame of every type, concatenated.
func allFrames() []byte {
	var b []byte
	b = appendHello(b, hello{Version: protocolVersion, From: "a", To: "b", Incarnation: 42})
	b = appendHelloAck(b, helloAck{Version: protocolVersion, From: "b", Incarnation: 7})
	b = appendReject(b, "no")
	b = appendInterest(b, interestFrame{Full: true, To: 3, Add: []string{"a/#", "$share/g/b"}})
	b = appendInterest(b, interestFrame{From: 3, To: 5, Add: []string{"c"}, Remove: []string{"a/#"}})
	b = appendPublishBatch(b, batchHeader{Inc: 1e18, Gen: 2, Base: 5},
		[]*Publish{{Msg: []byte("m1"), QoS: 1, Direct: true, seq: 5}, {Msg: []byte("m2"), Groups: []string{"$share/g/b"}, seq: 3}})
	b = appendRetainedBatch(b, [][]byte{[]byte("r1"), nil})
	b = appendRequest(b, request{ID: 9, Method: 2, Body: []byte("body")})
	b = appendRequest(b, request{Method: 3})
	b = appendResponse(b, response{ID: 9, Status: statusError, Body: []byte("bad")})
	b = appendPing(b)
	b = appendAck(b, ackFrame{Inc: 1e18, Gen: 2, Seq: 5})
	f, at := beginTransit(b, transitHeader{From: "a", To: "c", Type: framePublish})
	b = endFrame(appendPublishBody(f, batchHeader{Inc: 7, Gen: 1, Base: 1}, []*Publish{{Msg: []byte("m3"), QoS: 2, seq: 1}}), at)
	f, at = beginTransit(b, transitHeader{From: "c", To: "a", Type: frameAck})
	b = endFrame(appendAckBody(f, ackFrame{Inc: 7, Gen: 1, Seq: 1}), at)
	f, at = beginTransit(b, transitHeader{From: "a", To: "c", Type: frameRetained})
	b = endFrame(append(binary.AppendUvarint(f, 1), 2, 'r', '2'), at)
	b = appendReach(b, reachFrame{Heard: []string{"a", "c"}, Sends: []string{"c"}})
	return b
}

func TestFrameRoundTrip(t *testing.T) {
	r := bufio.NewReader(bytes.NewReader(allFrames()))
	var types []byte
	var buf []byte
	for {
		typ, body, nbuf, err := readFrame(r, buf, 1<<20)
		buf = nbuf
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		types = append(types, typ)
		if err := decodeBody(typ, body, true); err != nil {
			t.Fatalf("%s: %v", frameName(typ), err)
		}
	}
	want := []byte{frameHello, frameHelloAck, frameReject, frameInterest, frameInterest, framePublish, frameRetained,
		frameRequest, frameRequest, frameResponse, framePing, frameAck, frameTransit, frameTransit, frameTransit, frameReach}
	if !bytes.Equal(types, want) {
		t.Fatalf("types %v, want %v", types, want)
	}
}

func TestFrameLimits(t *testing.T) {
	big := appendRequest(nil, request{ID: 1, Body: make([]byte, 2000)})
	_, _, _, err := readFrame(bufio.NewReader(bytes.NewReader(big)), nil, 1000)
	if !errors.Is(err, ErrFrameTooLarge) {
		t.Fatalf("oversized frame: %v", err)
	}
	_, _, _, err = readFrame(bufio.NewReader(bytes.NewReader([]byte{0, 0, 0, 0, 1})), nil, 1000)
	if !errors.Is(err, ErrCorrupt) {
		t.Fatalf("zero-length frame: %v", err)
	}
	_, _, _, err = readFrame(bufio.NewReader(bytes.NewReader(big[:100])), nil, 1<<20)
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("truncated frame: %v", err)
	}
	for name, body := range map[string][]byte{
		"delta going backwards":  appendInterest(nil, interestFrame{From: 5, To: 5})[5:],
		"snapshot with removals": appendInterest(nil, interestFrame{Full: true, Remove: []string{"x"}})[5:],
		"response without id":    appendResponse(nil, response{})[5:],
		"ack of nothing":         appendAck(nil, ackFrame{Inc: 1, Gen: 1})[5:],
		"batch with base 0":      appendPublishBatch(nil, batchHeader{Inc: 1, Gen: 1}, nil)[5:],
		"transit to its origin":  transitOf(transitHeader{From: "a", To: "a", Type: frameAck}, appendAckBody(nil, ackFrame{Seq: 1})),
		"transit of a request":   transitOf(transitHeader{From: "a", To: "b", Type: frameRequest}, nil),
		"trailing bytes":         append(appendHello(nil, hello{From: "a"})[5:], 0),
		"huge string count":      {0, 0, 1, 0xff, 0xff, 0xff, 0xff, 0x0f},
	} {
		typ := frameInterest
		switch name {
		case "response without id":
			typ = frameResponse
		case "trailing bytes":
			typ = frameHello
		case "ack of nothing":
			typ = frameAck
		case "batch with base 0":
			typ = framePublish
		case "transit to its origin", "transit of a request":
			typ = frameTransit
		}
		if err := decodeBody(typ, body, false); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: %v, want ErrCorrupt", name, err)
		}
	}
}

// decodeBody decodes a frame body of any type; with check set, it also
// re-encodes what it decoded and verifies the round trip.
func decodeBody(typ byte, body []byte, check bool) error {
	again := func(enc []byte) []byte { return enc[frameHeaderLen:] }
	switch typ {
	case frameHello:
		h, err := decodeHello(body)
		if err == nil && check && !bytes.Equal(again(appendHello(nil, h)), body) {
			panic("hello round trip")
		}
		return err
	case frameHelloAck:
		h, err := decodeHelloAck(body)
		if err == nil && check && !bytes.Equal(again(appendHelloAck(nil, h)), body) {
			panic("hello-ack round trip")
		}
		return err
	case frameReject:
		_, err := decodeReject(body)
		return err
	case frameInterest:
		f, err := decodeInterest(body)
		if err == nil && check && !bytes.Equal(again(appendInterest(nil, f)), body) {
			panic("interest round trip")
		}
		return err
	case framePublish:
		var items []*Publish
		var h batchHeader
		err := decodePublishBatch(body, func(hh batchHeader) error { h = hh; return nil }, func(it publishItem) error {
			p := &Publish{Msg: it.Msg, Direct: it.Direct, Groups: it.Groups, seq: it.Seq}
			if it.Acked {
				p.QoS = 1
			}
			items = append(items, p)
			return nil
		})
		if err == nil && check && !bytes.Equal(again(appendPublishBatch(nil, h, items)), body) {
			panic("publish round trip")
		}
		return err
	case frameAck:
		a, err := decodeAck(body)
		if err == nil && check && !bytes.Equal(again(appendAck(nil, a)), body) {
			panic("ack round trip")
		}
		return err
	case frameTransit:
		h, inner, err := decodeTransit(body)
		if err != nil {
			return err
		}
		if check && !bytes.Equal(transitOf(h, inner), body) {
			panic("transit round trip")
		}
		return decodeBody(h.Type, inner, check)
	case frameReach:
		r, err := decodeReach(body)
		if err == nil && check && !bytes.Equal(again(appendReach(nil, r)), body) {
			panic("reach round trip")
		}
		return err
	case frameRetained:
		var msgs [][]byte
		err := decodeRetainedBatch(body, func(msg []byte) error {
			msgs = append(msgs, msg)
			return nil
		})
		if err == nil && check && !bytes.Equal(again(appendRetainedBatch(nil, msgs)), body) {
			panic("retained round trip")
		}
		return err
	case frameRequest:
		r, err := decodeRequest(body)
		if err == nil && check && !bytes.Equal(again(appendRequest(nil, r)), body) {
			panic("request round trip")
		}
		return err
	case frameResponse:
		r, err := decodeResponse(body)
		if err == nil && check && !reflect.DeepEqual(again(appendResponse(nil, r)), body) {
			panic("response round trip")
		}
		return err
	case framePing:
		return nil
	}
	return ErrCorrupt
}

// transitOf returns the body of a transit frame carrying body.
func transitOf(h transitHeader, body []byte) []byte {
	f, at := beginTransit(nil, h)
	return endFrame(append(f, body...), at)[frameHeaderLen:]
}

// FuzzFrames reads a stream of frames and decodes every body: nothing may
// panic, and a body that decodes must re-encode to the same bytes, unless
// it holds an over-long varint (which the decoder accepts and the encoder
// never writes).
func FuzzFrames(f *testing.F) {
	f.Add(allFrames())
	f.Fuzz(func(t *testing.T, data []byte) {
		r := bufio.NewReader(bytes.NewReader(data))
		var buf []byte
		for {
			typ, body, nbuf, err := readFrame(r, buf, 1<<16)
			buf = nbuf
			if err != nil {
				return
			}
			if decodeBody(typ, body, false) == nil && !mayHoldOverlongVarint(body) {
				_ = decodeBody(typ, body, true)
			}
		}
	})
}

// mayHoldOverlongVarint reports whether b has a byte with the continuation
// bit followed by a zero byte, which every non-minimal varint contains.
func mayHoldOverlongVarint(b []byte) bool {
	for i := 0; i+1 < len(b); i++ {
		if b[i]&0x80 != 0 && b[i+1] == 0 {
			return true
		}
	}
	return false
}
