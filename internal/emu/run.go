package emu

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"time"

	"github.com/sextantmq/sextant/internal/placement"
)

// ErrOptions is returned for options a scenario cannot run with.
var ErrOptions = errors.New("emu: invalid options")

// Options are the knobs shared by the scenarios.
type Options struct {
	// Permutations is the number of random workloads per point (ePulsar: 1000).
	Permutations int
	// Seed seeds everything: city choice, k-means, Vivaldi, workloads.
	Seed uint64
	// Workers is the number of goroutines evaluating permutations; 0 means
	// GOMAXPROCS. The results do not depend on it.
	Workers int
	// Topologies is the number of distinct topologies (MMOG: random city
	// sets, each with its own Vivaldi embedding) per point; permutation i
	// uses topology i mod Topologies. 0 means 50 (or Permutations if fewer).
	Topologies int
	// Sites is the base-station dataset for the UAV scenario: "melbourne"
	// (default) or "atlanta".
	Sites string
	// Vivaldi drives the coordinate embedding; zero Rounds means 600
	// rounds (ten minutes of one probe per second, the stabilisation time
	// ePulsar allowed) with 5% jitter. Its Seed is ignored: each topology's
	// embedding is seeded from Seed.
	Vivaldi VivaldiConfig
	// Progress, if set, is called after each finished permutation with the
	// scenario, the point's label, and the counts done and total for the
	// whole scenario. It is called from one goroutine at a time.
	Progress func(scenario, point string, done, total int)
}

func (o *Options) check() error {
	if o.Permutations < 1 {
		return fmt.Errorf("%w: permutations must be at least 1, got %d", ErrOptions, o.Permutations)
	}
	if o.Workers < 0 {
		return fmt.Errorf("%w: workers must not be negative", ErrOptions)
	}
	if o.Workers == 0 {
		o.Workers = runtime.GOMAXPROCS(0)
	}
	if o.Topologies < 0 {
		return fmt.Errorf("%w: topologies must not be negative", ErrOptions)
	}
	if o.Topologies == 0 {
		o.Topologies = 50
	}
	o.Topologies = min(o.Topologies, o.Permutations)
	if o.Vivaldi.Rounds == 0 {
		o.Vivaldi.Rounds, o.Vivaldi.Jitter = 600, 0.05
	}
	if o.Vivaldi.Rounds < 0 || o.Vivaldi.Jitter < 0 {
		return fmt.Errorf("%w: negative vivaldi rounds or jitter", ErrOptions)
	}
	return nil
}

// Result is one scenario's outcome: per point of the varied parameter, per
// policy, the scores over all permutations.
type Result struct {
	Scenario  string
	Title     string
	XLabel    string // the varied parameter, e.g. "cities"
	Threshold time.Duration
	Policies  []string
	Points    []Point
	// Notes record the seeds, the choices made and the coordinate accuracy.
	Notes []string
}

// Point is the result at one value of the varied parameter.
type Point struct {
	X     int
	Label string
	// Vivaldi is the accuracy of the coordinates used at this point (the
	// mean over permutations when each has its own coordinates).
	Vivaldi ErrorStats
	Stats   []Stats // one per policy, in Result.Policies order
}

// Stats aggregate one policy's scores over the permutations of a point.
type Stats struct {
	// MeanWorst is the mean over permutations of the worst pair latency of
	// the permutation; MaxWorst the largest.
	MeanWorst, MaxWorst time.Duration
	// MeanTopicWorst is the mean over all topics of all permutations of the
	// topic's worst pair latency.
	MeanTopicWorst time.Duration
	// MeanPair is the mean latency over all pairs of all permutations.
	MeanPair time.Duration
	// Violations of Pairs producer-consumer pairs were over the threshold.
	Violations, Pairs int64
}

// ViolationRatio is Violations/Pairs.
func (s Stats) ViolationRatio() float64 {
	if s.Pairs == 0 {
		return 0
	}
	return float64(s.Violations) / float64(s.Pairs)
}

// scenarioPoint is one point to evaluate: perm returns permutation i's
// world (shared between permutations) and draws its workload from rng.
type scenarioPoint struct {
	x     int
	label string
	perm  func(i int, rng *rand.Rand) (*world, []placement.Topic, error)
}

// worldCache builds each of n worlds once, on first use, from its own seeded
// random source, so a world does not depend on which worker asks first.
type worldCache struct {
	once   []sync.Once
	worlds []*world
	errs   []error
	build  func(i int, rng *rand.Rand) (*world, error)
	seed   uint64
	point  int
}

func newWorldCache(n int, seed uint64, point int, build func(i int, rng *rand.Rand) (*world, error)) *worldCache {
	return &worldCache{once: make([]sync.Once, n), worlds: make([]*world, n), errs: make([]error, n), build: build, seed: seed, point: point}
}

func (c *worldCache) get(perm int) (*world, error) {
	i := perm % len(c.worlds)
	c.once[i].Do(func() {
		rng := rand.New(rand.NewPCG(c.seed^0x70b0_1091, uint64(c.point)<<32|uint64(i)))
		c.worlds[i], c.errs[i] = c.build(i, rng)
	})
	return c.worlds[i], c.errs[i]
}

// permRand is the random source of one permutation: a function of the seed,
// the point and the permutation only.
func permRand(seed uint64, point, perm int) *rand.Rand {
	return rand.New(rand.NewPCG(seed, uint64(point)<<32|uint64(perm)))
}

// runPoints evaluates opt.Permutations workloads at every point on
// opt.Workers goroutines and aggregates them in permutation order.
func runPoints(ctx context.Context, opt Options, scenario string, points []scenarioPoint) ([]Point, error) {
	type job struct{ point, perm int }
	type done struct {
		job
		scores []score
		acc    ErrorStats
		err    error
	}
	scores := make([][][]score, len(points))
	accs := make([][]ErrorStats, len(points))
	for i := range scores {
		scores[i] = make([][]score, opt.Permutations)
		accs[i] = make([]ErrorStats, opt.Permutations)
	}
	jobs := make(chan job)
	results := make(chan done)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	for w := 0; w < opt.Workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range jobs {
				w, topics, err := points[j.point].perm(j.perm, permRand(opt.Seed, j.point, j.perm))
				var s []score
				var acc ErrorStats
				if err == nil {
					s, err = w.evaluate(topics)
					acc = w.accuracy
				}
				select {
				case results <- done{job: j, scores: s, acc: acc, err: err}:
				case <-ctx.Done():
					return
				}
			}
		}()
	}
	go func() {
		defer close(jobs)
		for p := range points {
			for k := 0; k < opt.Permutations; k++ {
				select {
				case jobs <- job{p, k}:
				case <-ctx.Done():
					return
				}
			}
		}
	}()
	go func() { wg.Wait(); close(results) }()

	total, count := len(points)*opt.Permutations, 0
	var firstErr error
	for r := range results {
		if r.err != nil && firstErr == nil {
			firstErr = r.err
			cancel()
		}
		scores[r.point][r.perm] = r.scores
		accs[r.point][r.perm] = r.acc
		count++
		if opt.Progress != nil && firstErr == nil {
			opt.Progress(scenario, points[r.point].label, count, total)
		}
	}
	if firstErr != nil {
		return nil, firstErr
	}
	if err := ctx.Err(); err != nil || count < total {
		return nil, fmt.Errorf("emu: %s interrupted after %d of %d permutations: %w", scenario, count, total, context.Cause(ctx))
	}
	out := make([]Point, len(points))
	for p, pt := range points {
		out[p] = Point{X: pt.x, Label: pt.label, Vivaldi: meanAccuracy(accs[p]), Stats: aggregate(scores[p])}
	}
	return out, nil
}

func aggregate(perms [][]score) []Stats {
	stats := make([]Stats, len(policyNames))
	for i := range stats {
		var worstSum, pairSum, topicSum time.Duration
		var topics int64
		for _, perm := range perms {
			s := perm[i]
			worstSum += s.worst
			pairSum += s.sum
			topicSum += s.topicWorst
			topics += s.topics
			stats[i].MaxWorst = max(stats[i].MaxWorst, s.worst)
			stats[i].Violations += s.violations
			stats[i].Pairs += s.pairs
		}
		stats[i].MeanWorst = worstSum / time.Duration(len(perms))
		if stats[i].Pairs > 0 {
			stats[i].MeanPair = pairSum / time.Duration(stats[i].Pairs)
		}
		if topics > 0 {
			stats[i].MeanTopicWorst = topicSum / time.Duration(topics)
		}
	}
	return stats
}

func meanAccuracy(accs []ErrorStats) ErrorStats {
	var m ErrorStats
	for _, a := range accs {
		m.MedianRel += a.MedianRel
		m.P90Rel += a.P90Rel
		m.MedianAbsMS += a.MedianAbsMS
	}
	n := float64(max(len(accs), 1))
	return ErrorStats{MedianRel: m.MedianRel / n, P90Rel: m.P90Rel / n, MedianAbsMS: m.MedianAbsMS / n}
}
