package topiclog

import (
	"math"
	"sort"
)

// seqList holds the positions of one topic's retained records, in index
// order, in about 4 bytes each: fixed-size chunks of 32-bit offsets from the
// chunk's first position. A chunk whose offsets overflow 32 bits (a topic
// silent for 4 billion records of its group) switches to 64-bit entries.
// Every chunk but the last is full, so entry i is found by division.
type seqList struct {
	chunks []seqChunk
	start  int // entries of chunks[0] before start were dropped
	n      int // live entries
}

const chunkLen = 1024

type seqChunk struct {
	base uint64
	d    []uint32 // position = base + d[i]; nil once wide
	w    []uint64 // positions, when a delta overflowed
}

func (c *seqChunk) len() int {
	if c.w != nil {
		return len(c.w)
	}
	return len(c.d)
}

func (c *seqChunk) at(i int) uint64 {
	if c.w != nil {
		return c.w[i]
	}
	return c.base + uint64(c.d[i])
}

func (c *seqChunk) push(seq uint64) {
	if c.w != nil {
		c.w = append(c.w, seq)
		return
	}
	if delta := seq - c.base; delta <= math.MaxUint32 {
		c.d = append(c.d, uint32(delta))
		return
	}
	c.w = make([]uint64, len(c.d), max(cap(c.d), len(c.d)+1))
	for i, d := range c.d {
		c.w[i] = c.base + uint64(d)
	}
	c.d = nil
	c.w = append(c.w, seq)
}

func (s *seqList) len() int { return s.n }

// push appends a position greater than every position held.
func (s *seqList) push(seq uint64) {
	if len(s.chunks) == 0 || s.chunks[len(s.chunks)-1].len() == chunkLen {
		c := seqChunk{base: seq}
		if len(s.chunks) > 0 {
			// A topic that filled a chunk is busy: allocate the next
			// one whole rather than growing it by doubling.
			c.d = make([]uint32, 0, chunkLen)
		}
		s.chunks = append(s.chunks, c)
	}
	s.chunks[len(s.chunks)-1].push(seq)
	s.n++
}

// at returns the i-th live position (0 <= i < len).
func (s *seqList) at(i int) uint64 {
	p := s.start + i
	return s.chunks[p/chunkLen].at(p % chunkLen)
}

// dropFront forgets the first k live positions.
func (s *seqList) dropFront(k int) {
	if k >= s.n {
		*s = seqList{}
		return
	}
	s.start += k
	s.n -= k
	drop := s.start / chunkLen
	if drop > 0 {
		clear(s.chunks[:drop]) // let the dropped chunks' arrays go
		s.chunks = s.chunks[drop:]
		s.start -= drop * chunkLen
	}
}

// countBelow returns how many live positions are below seq.
func (s *seqList) countBelow(seq uint64) int {
	return sort.Search(s.n, func(i int) bool { return s.at(i) >= seq })
}
