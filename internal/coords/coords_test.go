package coords

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/hashicorp/serf/coordinate"
)

func coord(h float64, vec ...float64) *coordinate.Coordinate {
	return &coordinate.Coordinate{Vec: vec, Height: h}
}

func near(a, b time.Duration) bool {
	d := a - b
	return d > -time.Microsecond && d < time.Microsecond
}

func TestOneWayIsHalfTheRTT(t *testing.T) {
	a, b := coord(0.001, 0, 0), coord(0.002, 0.030, 0.040) // 50 ms + 3 ms heights
	if got := RTT(a, b); !near(got, 53*time.Millisecond) {
		t.Fatalf("RTT %v, want 53ms", got)
	}
	if got := OneWay(a, b); !near(got, 26500*time.Microsecond) {
		t.Fatalf("OneWay %v, want 26.5ms", got)
	}
}

func TestClientAddsAccessRTTToHeight(t *testing.T) {
	node, other := coord(0.001, 0.010, 0), coord(0.001, 0.050, 0)
	c := Client(node, 10*time.Millisecond)
	if !near(RTT(c, other)-RTT(node, other), 10*time.Millisecond) {
		t.Fatalf("client RTT %v, node RTT %v: want +10ms", RTT(c, other), RTT(node, other))
	}
	if node.Height != 0.001 {
		t.Fatal("Client modified its input")
	}
	if got := Client(node, -time.Second); got.Height != node.Height {
		t.Fatal("negative access RTT changed the height")
	}
}

func TestCentroidIsTheComponentMean(t *testing.T) {
	a := &coordinate.Coordinate{Vec: []float64{0, 0}, Height: 0.002, Adjustment: 0.001, Error: 0.2}
	b := &coordinate.Coordinate{Vec: []float64{0.020, 0.010}, Height: 0.004, Adjustment: -0.001, Error: 0.5}
	c, err := Centroid([]*coordinate.Coordinate{a, b})
	if err != nil {
		t.Fatal(err)
	}
	want := &coordinate.Coordinate{Vec: []float64{0.010, 0.005}, Height: 0.003, Adjustment: 0, Error: 0.5}
	for i := range want.Vec {
		if math.Abs(c.Vec[i]-want.Vec[i]) > 1e-12 {
			t.Fatalf("centroid %+v, want %+v", c, want)
		}
	}
	if math.Abs(c.Height-want.Height) > 1e-12 || math.Abs(c.Adjustment) > 1e-12 || c.Error != want.Error {
		t.Fatalf("centroid %+v, want %+v", c, want)
	}
}

func TestCentroidRejectsBadInput(t *testing.T) {
	if _, err := Centroid(nil); !errors.Is(err, ErrEmpty) {
		t.Fatalf("empty: %v", err)
	}
	if _, err := Centroid([]*coordinate.Coordinate{coord(0, 0, 0), coord(0, 0)}); !errors.Is(err, ErrDimensions) {
		t.Fatalf("mixed dimensions: %v", err)
	}
	if _, err := Centroid([]*coordinate.Coordinate{coord(0, math.NaN())}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("NaN: %v", err)
	}
	if _, err := MaxDeviation([]*coordinate.Coordinate{coord(0, 0)}, coord(0, 0, 0)); !errors.Is(err, ErrDimensions) {
		t.Fatalf("MaxDeviation mixed dimensions: %v", err)
	}
}

func TestDeviationOfClientsOnOneNodeIsZero(t *testing.T) {
	node := coord(0.003, 0.010, 0.020)
	cs := []*coordinate.Coordinate{Client(node, 10*time.Millisecond), Client(node, 10*time.Millisecond)}
	c, err := Centroid(cs)
	if err != nil {
		t.Fatal(err)
	}
	dev, err := MaxDeviation(cs, c)
	if err != nil || !near(dev, 0) {
		t.Fatalf("deviation %v (%v), want 0", dev, err)
	}
}

// The deviation bound RTT(m, b) <= RTT(centroid, b) + Deviation(m, centroid)
// is what makes W(t,b) an upper bound of the all-pairs estimate.
func TestDeviationBoundsEveryMemberDistance(t *testing.T) {
	const seed = 42
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	random := func() *coordinate.Coordinate {
		c := coordinate.NewCoordinate(coordinate.DefaultConfig())
		for i := range c.Vec {
			c.Vec[i] = rng.Float64() * 0.1
		}
		c.Height = rng.Float64() * 0.01
		c.Adjustment = rng.Float64() * 0.002
		return c
	}
	for trial := 0; trial < 200; trial++ {
		members := make([]*coordinate.Coordinate, 1+rng.IntN(10))
		for i := range members {
			members[i] = random()
		}
		c, err := Centroid(members)
		if err != nil {
			t.Fatal(err)
		}
		maxDev, err := MaxDeviation(members, c)
		if err != nil {
			t.Fatal(err)
		}
		b := random()
		if worst := MaxRTT(members, b); worst > RTT(c, b)+maxDev+time.Microsecond {
			t.Fatalf("trial %d: member RTT %v exceeds centroid RTT %v + deviation %v", trial, worst, RTT(c, b), maxDev)
		}
	}
}

// RTT is serf's DistanceTo wherever the adjustments take off less than half
// of the raw distance, and half the raw distance where they take off more.
func TestRTTMatchesSerfDistanceUnlessAdjustmentsTakeOverHalf(t *testing.T) {
	const seed = 7
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	floored := 0
	for trial := 0; trial < 1000; trial++ {
		a, b := coordinate.NewCoordinate(coordinate.DefaultConfig()), coordinate.NewCoordinate(coordinate.DefaultConfig())
		for i := range a.Vec {
			a.Vec[i], b.Vec[i] = rng.NormFloat64()*0.005, rng.NormFloat64()*0.005
		}
		a.Height, b.Height = rng.Float64()*0.01, rng.Float64()*0.01
		a.Adjustment, b.Adjustment = rng.NormFloat64()*0.01, rng.NormFloat64()*0.01
		a2, b2 := a.Clone(), b.Clone()
		a2.Adjustment, b2.Adjustment = 0, 0
		raw := a2.DistanceTo(b2)
		got := RTT(a, b)
		if adj := raw.Seconds() + a.Adjustment + b.Adjustment; adj >= raw.Seconds()/2 {
			if want := a.DistanceTo(b); got != want {
				t.Fatalf("trial %d: RTT %v, serf DistanceTo %v", trial, got, want)
			}
			continue
		}
		floored++
		if want := raw / 2; got < want-time.Nanosecond || got > want+time.Nanosecond {
			t.Fatalf("trial %d: RTT %v, want half the raw distance %v", trial, got, want)
		}
	}
	if floored == 0 || floored == 1000 {
		t.Fatalf("%d of 1000 trials floored: the test covers only one case", floored)
	}
}

// Where serf's DistanceTo jumps (the adjusted distance crossing zero), RTT
// moves by no more than the coordinates do.
func TestRTTIsContinuousWhereSerfJumps(t *testing.T) {
	a, b := coord(0, 0, 0), coord(0, 0.023, 0)    // 23 ms apart raw
	a.Adjustment, b.Adjustment = -0.0116, -0.0116 // adjusted: -0.2 ms
	b2 := coord(0, 0.0235, 0)                     // 0.5 ms further: adjusted +0.3 ms
	b2.Adjustment = b.Adjustment
	if jump := a.DistanceTo(b) - a.DistanceTo(b2); jump < 20*time.Millisecond {
		t.Fatalf("serf's DistanceTo moved by %v only: the test is not at its jump", jump)
	}
	d1, d2 := RTT(a, b), RTT(a, b2)
	if diff := d2 - d1; diff < 0 || diff > time.Millisecond {
		t.Fatalf("RTT moved from %v to %v for 0.5 ms of coordinate change", d1, d2)
	}
}

func TestEnclosingCenterTightensTheBound(t *testing.T) {
	// Five members at one place and one far away: the centroid sits near the
	// five, the enclosing centre halfway.
	var cs []*coordinate.Coordinate
	for i := 0; i < 5; i++ {
		cs = append(cs, coord(0.001, 0, 0))
	}
	cs = append(cs, coord(0.001, 0.060, 0))
	centroid, _ := Centroid(cs)
	center, err := EnclosingCenter(cs, 64)
	if err != nil {
		t.Fatal(err)
	}
	devCentroid, _ := MaxDeviation(cs, centroid)
	devCenter, _ := MaxDeviation(cs, center)
	if !near(devCentroid, 50*time.Millisecond) || devCenter > 31*time.Millisecond {
		t.Fatalf("max deviation: centroid %v (want 50ms), enclosing centre %v (want ~30ms)", devCentroid, devCenter)
	}
	again, _ := EnclosingCenter(cs, 64)
	if again.Vec[0] != center.Vec[0] {
		t.Fatal("not deterministic")
	}
	one, _ := EnclosingCenter(cs[:1], 64)
	if RTT(one, cs[0]) != RTT(cs[0], cs[0]) {
		t.Fatal("centre of one member is not the member")
	}
}
