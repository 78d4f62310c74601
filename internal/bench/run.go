package bench

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sextantmq/sextant/internal/mqtt/packet"
	"github.com/sextantmq/sextant/internal/mqttclient"
	"github.com/sextantmq/sextant/internal/procstat"
)

// dialers is how many connections are opened concurrently.
const dialers = 16

// maxErrors is how many distinct errors a Result keeps.
const maxErrors = 10

// runner is one run's state.
type runner struct {
	cfg          Config
	topicPrefix  string
	clientPrefix string
	topics       []string
	shards       []*shard

	subs       []*subscriber
	subClients []*mqttclient.Client
	pubs       []*publisher

	// progress guards what the progress ticker reads: the phase, the
	// connection count, and the subs and pubs slices while they are filled.
	progress struct {
		sync.Mutex
		phase string
		conns int
	}
	start time.Time

	errMu  sync.Mutex
	errs   []string
	errCnt int
}

// Run runs cfg's scenario and returns its result. It fails only when the
// run could not be set up (bad config, broker unreachable, subscription
// refused); trouble during the run (a connection lost, a refused publish)
// is reported in Result.Errors.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	if err := cfg.Normalize(); err != nil {
		return nil, err
	}
	seed := cfg.Seed
	if seed == 0 {
		seed = time.Now().UnixNano()
	}
	rnd := rand.New(rand.NewPCG(uint64(seed), 0x5e7a47))
	id := strconv.FormatUint(rnd.Uint64()%(36*36*36*36*36*36), 36)
	r := &runner{cfg: cfg, topicPrefix: cfg.TopicPrefix, clientPrefix: cfg.ClientPrefix}
	if r.topicPrefix == "" {
		r.topicPrefix = "sxbench/" + id
	}
	if r.clientPrefix == "" {
		r.clientPrefix = "sxb-" + id
	}
	r.start = time.Now()
	stopProgress := r.startProgress()
	defer stopProgress()
	if cfg.Scenario == Connections {
		return r.connections(ctx)
	}
	return r.messages(ctx)
}

func (r *runner) setPhase(p string) {
	r.progress.Lock()
	r.progress.phase = p
	r.progress.Unlock()
}

// startProgress calls cfg.Progress about once a second until the returned
// function is called (which waits for the ticker goroutine to end).
func (r *runner) startProgress() func() {
	if r.cfg.Progress == nil {
		return func() {}
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				r.cfg.Progress(r.snapshot())
			}
		}
	}()
	return func() { close(stop); wg.Wait() }
}

func (r *runner) countConn() {
	r.progress.Lock()
	r.progress.conns++
	r.progress.Unlock()
}

func (r *runner) snapshot() Progress {
	p := Progress{Elapsed: time.Since(r.start)}
	r.progress.Lock()
	defer r.progress.Unlock()
	p.Phase, p.Conns = r.progress.phase, r.progress.conns
	for _, pub := range r.pubs {
		if pub != nil {
			p.Sent += pub.total.Load()
		}
	}
	for _, s := range r.subs {
		p.Received += s.received.Load()
	}
	return p
}

func (r *runner) addError(what string, err error) {
	r.errMu.Lock()
	defer r.errMu.Unlock()
	r.errCnt++
	if len(r.errs) < maxErrors {
		r.errs = append(r.errs, what+": "+err.Error())
	}
}

func (r *runner) options(id string) mqttclient.Options {
	o := mqttclient.Options{
		Version: r.cfg.Version, ClientID: id, KeepAlive: r.cfg.KeepAlive,
		Username: r.cfg.Username, TLS: r.cfg.TLS,
	}
	if r.cfg.Password != "" {
		o.Password = []byte(r.cfg.Password)
	}
	return o
}

// parallel runs f(0..n-1) on up to workers goroutines; it stops handing out
// work once f returns an error or ctx ends, and returns the first error.
func parallel(ctx context.Context, n, workers int, f func(i int) error) error {
	var next atomic.Int64
	var first error
	var once sync.Once
	var wg sync.WaitGroup
	for range min(workers, n) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= n || ctx.Err() != nil {
					return
				}
				if err := f(i); err != nil {
					once.Do(func() { first = err })
					next.Store(int64(n))
					return
				}
			}
		}()
	}
	wg.Wait()
	if first == nil && ctx.Err() != nil {
		return ctx.Err()
	}
	return first
}

// layout sets the run's topics and makes its subscribers: which filter each
// subscribes to and which topic it accounts against (-1: all).
func (r *runner) layout() (filters []string) {
	c := &r.cfg
	nt := c.Topics
	if c.Scenario == Fanin {
		nt = c.Pubs
	}
	r.topics = make([]string, nt)
	for i := range r.topics {
		r.topics[i] = r.topicPrefix + "/t/" + strconv.Itoa(i)
	}
	r.shards = make([]*shard, min(c.Subs, 16))
	for i := range r.shards {
		r.shards[i] = &shard{h: newHistogram()}
	}
	subs := make([]*subscriber, c.Subs)
	filters = make([]string, c.Subs)
	for i := range subs {
		topic, filter := -1, r.topics[0]
		switch c.Scenario {
		case Fanin:
			filter = r.topicPrefix + "/t/+"
		case ManyTopics:
			topic, filter = i, r.topics[i]
		}
		subs[i] = newSubscriber(topic, c.Pubs, r.shards[i%len(r.shards)])
		if c.Sequenced {
			subs[i].seq = newSeqCheck()
		}
		filters[i] = filter
	}
	r.progress.Lock()
	r.subs = subs
	r.progress.Unlock()
	return filters
}

// messages runs the message scenarios.
func (r *runner) messages(ctx context.Context) (*Result, error) {
	c := &r.cfg
	filters := r.layout()
	r.subClients = make([]*mqttclient.Client, c.Subs)
	r.progress.Lock()
	r.pubs = make([]*publisher, c.Pubs)
	r.progress.Unlock()
	closeAll := func() {
		_ = parallel(context.Background(), len(r.subClients)+len(r.pubs), dialers, func(i int) error {
			var cl *mqttclient.Client
			if i < len(r.subClients) {
				cl = r.subClients[i]
			} else if p := r.pubs[i-len(r.subClients)]; p != nil {
				cl = p.c
			}
			if cl != nil {
				dctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				_ = cl.Disconnect(dctx, nil)
				cancel()
			}
			return nil
		})
	}

	r.setPhase("connect")
	err := parallel(ctx, c.Subs, dialers, func(i int) error {
		o := r.options(fmt.Sprintf("%s-s%d", r.clientPrefix, i))
		o.OnPublish = r.subs[i].onPublish
		url := c.URL
		if c.SubURL != "" {
			url = c.SubURL
		}
		cl, err := mqttclient.Dial(ctx, url, o)
		if err != nil {
			return fmt.Errorf("subscriber %d: %w", i, err)
		}
		r.subClients[i] = cl
		_, err = cl.Subscribe(ctx, &packet.Subscribe{Subs: []packet.Subscription{{Filter: filters[i], QoS: c.QoS}}})
		if err != nil {
			return fmt.Errorf("subscriber %d: subscribe %q: %w", i, filters[i], err)
		}
		r.countConn()
		return nil
	})
	if err == nil {
		err = parallel(ctx, c.Pubs, dialers, func(i int) error {
			o := r.options(fmt.Sprintf("%s-p%d", r.clientPrefix, i))
			o.MaxInflight = c.Inflight
			cl, err := mqttclient.Dial(ctx, c.URL, o)
			if err != nil {
				return fmt.Errorf("publisher %d: %w", i, err)
			}
			r.progress.Lock()
			r.pubs[i] = newPublisher(i, cl, len(r.topics))
			r.progress.conns++
			r.progress.Unlock()
			return nil
		})
	}
	if err != nil {
		closeAll()
		return nil, fmt.Errorf("bench: %w", err)
	}

	if c.SubURL != "" && c.SubURL != c.URL && len(r.pubs) > 0 {
		// Subscribers on another node: their interest reaches the
		// publishers' node a moment after SUBACK; probe until it has.
		r.setPhase("warm-up")
		if err := r.warmUp(ctx); err != nil {
			closeAll()
			return nil, fmt.Errorf("bench: %w", err)
		}
	}

	before := r.sample()
	r.setPhase("publish")
	pubStart := time.Now()
	var deadline time.Time
	if c.Count == 0 {
		deadline = pubStart.Add(c.Duration)
	}
	pctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	for _, p := range r.pubs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p.run(pctx, r, pubStart, deadline)
		}()
	}
	wg.Wait()
	pubEnd := time.Now()

	r.setPhase("drain")
	after := r.drain(ctx)
	for i, cl := range r.subClients {
		if err := cl.Err(); err != nil {
			r.addError(fmt.Sprintf("subscriber %d", i), err)
		}
	}
	closeAll() // after this no publish callback can run
	return r.result(before, after, pubStart, pubEnd), nil
}

// drain waits until every owed delivery has arrived, or nothing has
// arrived for cfg.Drain, or ctx ends. It returns the CPU sample that ends
// the measured run: taken when the last delivery was seen, so that the
// idle wait for deliveries that never come (messages were lost) does not
// dilute the CPU figures.
func (r *runner) drain(ctx context.Context) sample {
	expected := r.expected()
	var last int64 = -1
	idleSince := time.Now()
	lastSeen := r.sample()
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	for {
		var got int64
		for _, s := range r.subs {
			got += s.received.Load()
		}
		acked := true
		for _, p := range r.pubs {
			acked = acked && p.pending.Load() == 0
		}
		if got >= expected && acked {
			return r.sample()
		}
		if got != last {
			last, idleSince = got, time.Now()
			lastSeen = r.sample()
		}
		if time.Since(idleSince) > r.cfg.Drain {
			return lastSeen
		}
		select {
		case <-ctx.Done():
			return lastSeen
		case <-t.C:
		}
	}
}

// expected is the number of distinct deliveries owed once publishing ended.
func (r *runner) expected() int64 {
	var n int64
	for _, s := range r.subs {
		for _, p := range r.pubs {
			if s.topic < 0 {
				for _, k := range p.sent {
					n += k
				}
			} else if s.topic < len(p.sent) {
				n += p.sent[s.topic]
			}
		}
	}
	return n
}

func (r *runner) sentTable() [][]int64 {
	t := make([][]int64, len(r.pubs))
	for i, p := range r.pubs {
		t[i] = p.sent
	}
	return t
}

// sample reads the generator's and the broker's /proc figures.
type sample struct {
	at     time.Time
	gen    procstat.Sample
	genErr error
	brk    procstat.Sample
	brkErr error
	sys    procstat.SystemCPU
	sysErr error
}

func (r *runner) sample() sample {
	s := sample{at: time.Now()}
	s.sys, s.sysErr = procstat.ReadSystemCPU()
	s.gen, s.genErr = procstat.Read(0)
	if r.cfg.BrokerPID > 0 {
		s.brk, s.brkErr = procstat.Read(r.cfg.BrokerPID)
	} else {
		s.brkErr = errors.New("no broker pid")
	}
	return s
}

// publisher is one publishing client and its counts.
// probePayload marks warm-up messages; subscribers do not count them.
const probePayload = "sxbench-probe"

// warmUp publishes probes on every topic until every subscriber has seen
// one, or gives up after 30 s.
func (r *runner) warmUp(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	c := r.pubs[0].c
	for {
		for _, t := range r.topics {
			if err := c.PublishAsync(ctx, &packet.Publish{Topic: t, Payload: []byte(probePayload)}, nil); err != nil {
				return fmt.Errorf("warm-up probe: %w", err)
			}
		}
		all := true
		for _, s := range r.subs {
			all = all && s.probed.Load()
		}
		if all {
			return nil
		}
		t := time.NewTimer(20 * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("warm-up: subscribers on %s did not receive messages published on %s", r.cfg.SubURL, r.cfg.URL)
		case <-t.C:
		}
	}
}

type publisher struct {
	idx     int
	c       *mqttclient.Client
	sent    []int64 // per topic; written by the publishing goroutine only
	total   atomic.Int64
	acked   atomic.Int64
	failed  atomic.Int64
	pending atomic.Int64 // QoS 1/2 publishes not yet completed
	maxLag  time.Duration
	lagSum  time.Duration
	lagN    int64
	done    func(error)
	errOnce sync.Once
	err     error
}

func newPublisher(idx int, c *mqttclient.Client, topics int) *publisher {
	p := &publisher{idx: idx, c: c, sent: make([]int64, topics)}
	p.done = func(err error) {
		if err != nil {
			p.failed.Add(1)
			p.errOnce.Do(func() { p.err = err })
		} else {
			p.acked.Add(1)
		}
		p.pending.Add(-1)
	}
	return p
}

// run publishes until Count messages are sent or deadline passes. With a
// rate, message k is due at start + offset + k*interval; the publisher
// sleeps until a message is due and then sends every message that is due
// (timer resolution makes these small bursts), stamping each with the time
// it actually left. How far sends lagged behind the schedule is recorded.
func (p *publisher) run(ctx context.Context, r *runner, start, deadline time.Time) {
	c := &r.cfg
	buf := make([]byte, c.PayloadSize)
	for i := HeaderSize; i < len(buf); i++ {
		buf[i] = 'x'
	}
	pk := &packet.Publish{QoS: c.QoS, Payload: buf}
	var interval time.Duration
	var timer *time.Timer
	if c.Rate > 0 {
		interval = time.Duration(float64(time.Second) * float64(c.Pubs) / c.Rate)
		start = start.Add(interval * time.Duration(p.idx) / time.Duration(c.Pubs))
		timer = time.NewTimer(time.Hour)
		defer timer.Stop()
	}
	nt := len(r.topics)
	for seq := 0; c.Count == 0 || seq < c.Count; seq++ {
		now := time.Now()
		if !deadline.IsZero() && !now.Before(deadline) {
			return
		}
		if interval > 0 {
			due := start.Add(time.Duration(seq) * interval)
			if d := due.Sub(now); d > 0 {
				timer.Reset(d)
				select {
				case <-ctx.Done():
					return
				case <-timer.C:
				}
				now = time.Now()
			}
			lag := now.Sub(due)
			p.lagSum += lag
			p.lagN++
			p.maxLag = max(p.maxLag, lag)
		}
		ti := 0
		switch c.Scenario {
		case Fanin:
			ti = p.idx
		case ManyTopics:
			ti = (p.idx + seq) % nt
		}
		PutHeader(buf, Header{Sent: now, Pub: uint32(p.idx), Seq: uint32(seq)})
		pk.Topic = r.topics[ti]
		if c.QoS > 0 {
			p.pending.Add(1)
		}
		if err := p.c.PublishAsync(ctx, pk, p.done); err != nil {
			if c.QoS > 0 {
				p.pending.Add(-1)
			}
			if ctx.Err() == nil {
				r.addError(fmt.Sprintf("publisher %d", p.idx), err)
			}
			return
		}
		p.sent[ti]++
		p.total.Add(1)
	}
}

// numCPU is the number of cores the generator may use.
func numCPU() int { return min(runtime.NumCPU(), runtime.GOMAXPROCS(0)) }
