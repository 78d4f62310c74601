package coords

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/hashicorp/serf/coordinate"
)

var (
	// ErrDimensions is returned when coordinates of different dimensionality
	// are combined.
	ErrDimensions = errors.New("coords: coordinates of different dimensionality")
	// ErrEmpty is returned when a centroid of no coordinates is asked for.
	ErrEmpty = errors.New("coords: empty set")
	// ErrInvalid is returned for a nil coordinate or one holding NaN or Inf.
	ErrInvalid = errors.New("coords: invalid coordinate")
)

// RTT is the round-trip time between a and b estimated by their coordinates:
// the Euclidean distance plus both heights (the raw distance), plus both
// adjustments, but never less than half the raw distance. a and b must have
// the same dimensionality (it panics otherwise, as serf's DistanceTo does).
//
// Serf's DistanceTo drops the adjustments when they would make the sum
// non-positive, so the estimate falls from the raw distance to nothing as
// the adjusted sum crosses zero: with adjustments of -12 ms per node, a
// pair 23 ms apart raw reads 0.3 ms or 22.9 ms as noise of a millisecond
// moves it, and placement decided on those jumps. The floor keeps the
// estimate continuous (equal to DistanceTo wherever the adjustments take
// off less than half), so small coordinate changes make small changes.
func RTT(a, b *coordinate.Coordinate) time.Duration {
	if len(a.Vec) != len(b.Vec) {
		panic(ErrDimensions)
	}
	var sum float64
	for i, v := range a.Vec {
		d := v - b.Vec[i]
		sum += d * d
	}
	raw := math.Sqrt(sum) + a.Height + b.Height
	return seconds(max(raw+a.Adjustment+b.Adjustment, raw/2))
}

// OneWay is the one-way latency between a and b: RTT(a, b)/2.
func OneWay(a, b *coordinate.Coordinate) time.Duration {
	return RTT(a, b) / 2
}

// Check reports whether c is usable: non-nil, finite, and of dimensionality
// dims (any dimensionality when dims is 0).
func Check(c *coordinate.Coordinate, dims int) error {
	if c == nil || !c.IsValid() {
		return ErrInvalid
	}
	if dims > 0 && len(c.Vec) != dims {
		return fmt.Errorf("%w: %d, want %d", ErrDimensions, len(c.Vec), dims)
	}
	return nil
}

// Client returns the coordinate of a client attached to an access node: the
// node's coordinate with the access round-trip time added to the height.
// Negative access RTTs count as zero.
func Client(access *coordinate.Coordinate, accessRTT time.Duration) *coordinate.Coordinate {
	c := access.Clone()
	if accessRTT > 0 {
		c.Height += accessRTT.Seconds()
	}
	return c
}

// Centroid returns the mean of cs, component by component: the mean Euclidean
// vector, the mean height, the mean adjustment and the largest error. Its
// distance to any point approximates the set's typical distance to it;
// Deviation bounds how much worse any member can be.
func Centroid(cs []*coordinate.Coordinate) (*coordinate.Coordinate, error) {
	if len(cs) == 0 {
		return nil, ErrEmpty
	}
	if err := Check(cs[0], 0); err != nil {
		return nil, err
	}
	dims := len(cs[0].Vec)
	out := &coordinate.Coordinate{Vec: make([]float64, dims)}
	for _, c := range cs {
		if err := Check(c, dims); err != nil {
			return nil, err
		}
		for i, v := range c.Vec {
			out.Vec[i] += v
		}
		out.Height += c.Height
		out.Adjustment += c.Adjustment
		out.Error = math.Max(out.Error, c.Error)
	}
	n := float64(len(cs))
	for i := range out.Vec {
		out.Vec[i] /= n
	}
	out.Height /= n
	out.Adjustment /= n
	return out, nil
}

// Deviation is how much farther (in RTT) member m can be from any point than
// centroid c is: the Euclidean distance from m to c plus m's excess height and
// excess adjustment over c's. By the triangle inequality, for every b,
// RTT(m, b) <= RTT(c, b) + Deviation(m, c) (whenever serf's non-negative
// clamp of adjusted distances does not apply). Unlike RTT(m, c), it does not
// count the heights of m and c as a distance between them, so a set whose
// members share one access node has deviation 0.
//
// It may be negative for a member closer than the centroid; MaxDeviation
// floors the set's result at 0.
func Deviation(m, c *coordinate.Coordinate) time.Duration {
	var sum float64
	for i := range m.Vec {
		d := m.Vec[i] - c.Vec[i]
		sum += d * d
	}
	dev := math.Sqrt(sum) + (m.Height - c.Height) + (m.Adjustment - c.Adjustment)
	return seconds(dev)
}

// MaxDeviation is the largest Deviation of the members of cs from c, and at
// least 0.
func MaxDeviation(cs []*coordinate.Coordinate, c *coordinate.Coordinate) (time.Duration, error) {
	var worst time.Duration
	for _, m := range cs {
		if err := Check(m, len(c.Vec)); err != nil {
			return 0, err
		}
		worst = max(worst, Deviation(m, c))
	}
	return worst, nil
}

// MaxRTT is the largest RTT from a member of cs to b, and 0 for an empty set.
func MaxRTT(cs []*coordinate.Coordinate, b *coordinate.Coordinate) time.Duration {
	var worst time.Duration
	for _, m := range cs {
		worst = max(worst, RTT(m, b))
	}
	return worst
}

func seconds(s float64) time.Duration {
	return time.Duration(s * float64(time.Second))
}

// EnclosingCenter approximates the point that minimises the largest
// Deviation of the members of cs: the centre of their smallest enclosing
// ball. It starts at the Centroid and, for the given number of iterations,
// steps towards the member with the largest deviation by 1/(i+1) of the way
// (Badoiu and Clarkson's iteration); height and adjustment stay the
// centroid's. Unlike the centroid, a few far members pull it as much as many
// near ones, so RTT(center, b) + MaxDeviation bounds the worst member more
// tightly. Deterministic.
func EnclosingCenter(cs []*coordinate.Coordinate, iterations int) (*coordinate.Coordinate, error) {
	c, err := Centroid(cs)
	if err != nil || len(cs) == 1 {
		return c, err
	}
	for i := 1; i <= iterations; i++ {
		far, farDev := cs[0], Deviation(cs[0], c)
		for _, m := range cs[1:] {
			if d := Deviation(m, c); d > farDev {
				far, farDev = m, d
			}
		}
		step := 1 / float64(i+1)
		for k := range c.Vec {
			c.Vec[k] += (far.Vec[k] - c.Vec[k]) * step
		}
	}
	return c, nil
}
