package bench

import (
	"fmt"
	"time"
)

// Result is what a run measured. Rates are per second; latencies are in
// milliseconds; CPU is in seconds and in cores (CPU seconds per wall-clock
// second).
type Result struct {
	Scenario    Scenario `json:"scenario"`
	URL         string   `json:"url"`
	Version     string   `json:"mqtt_version"`
	QoS         byte     `json:"qos"`
	PayloadSize int      `json:"payload_bytes"`
	Pubs        int      `json:"pubs"`
	Subs        int      `json:"subs"`
	Topics      int      `json:"topics"`
	TargetRate  float64  `json:"target_rate,omitempty"`
	Window      int      `json:"inflight_window,omitempty"` // effective, after the broker's Receive Maximum

	PublishSeconds float64 `json:"publish_seconds"`
	Seconds        float64 `json:"seconds"` // first send to last delivery
	Sent           int64   `json:"sent"`
	Acked          int64   `json:"acked"`
	PubFailed      int64   `json:"publish_failed"`
	Expected       int64   `json:"expected"`
	Received       int64   `json:"received"`
	Lost           int64   `json:"lost"`
	Duplicated     int64   `json:"duplicated"`
	Reordered      int64   `json:"reordered"`
	Foreign        int64   `json:"foreign"`
	// SxIndex is the sx-index check of a --sequenced run.
	SxIndex     *SeqStats `json:"sx_index,omitempty"`
	SendRate    float64   `json:"send_rate"`
	DeliverRate float64   `json:"deliver_rate"`
	Latency     Latency   `json:"latency"`
	// SendLag is how late, on average and at worst, open-loop sends left
	// compared with their schedule (ms).
	SendLagMean float64 `json:"send_lag_mean_ms,omitempty"`
	SendLagMax  float64 `json:"send_lag_max_ms,omitempty"`

	PerPublisher []PubAccount `json:"per_publisher,omitempty"`
	Generator    CPUStats     `json:"generator"`
	// MachineCores is how many cores the whole machine kept busy (all
	// processes, from /proc/stat): on a shared machine it shows what other
	// processes took.
	MachineCores float64      `json:"machine_cores"`
	Broker       *BrokerStats `json:"broker,omitempty"`
	Connections  *ConnStats   `json:"connections,omitempty"`

	Errors     []string `json:"errors,omitempty"`
	ErrorCount int      `json:"error_count,omitempty"`
	Notes      []string `json:"notes,omitempty"`
}

// CPUStats is a process's CPU use over the measured part of the run.
type CPUStats struct {
	CPUSeconds float64 `json:"cpu_seconds"`
	Cores      float64 `json:"cores"`
	NumCPU     int     `json:"num_cpu"`
	Saturated  bool    `json:"saturated"`
}

// BrokerStats is what /proc said about the broker process.
type BrokerStats struct {
	PID          int     `json:"pid"`
	CPUSeconds   float64 `json:"cpu_seconds"`
	Cores        float64 `json:"cores"`
	CPUPerMsgUS  float64 `json:"cpu_us_per_delivered_msg,omitempty"`
	RSSBeforeKiB int64   `json:"rss_before_kib"`
	RSSAfterKiB  int64   `json:"rss_after_kib"`
}

// ConnStats is the connections scenario's outcome.
type ConnStats struct {
	Target      int     `json:"target"`
	Opened      int     `json:"opened"`
	Failed      int     `json:"failed"`
	RampSeconds float64 `json:"ramp_seconds"`
	// Connect is the time from dialling to the SUBACK, per connection.
	Connect Latency `json:"connect"`
	// RSSPerConnBytes is (broker RSS after - before) / opened.
	RSSPerConnBytes float64 `json:"rss_per_conn_bytes,omitempty"`
}

// saturation is the share of the machine's cores past which the generator
// (or generator plus broker) is reported as saturating the machine.
const saturation = 0.9

// result assembles the Result of a message scenario.
func (r *runner) result(before, after sample, pubStart, pubEnd time.Time) *Result {
	c := &r.cfg
	res := r.header()
	res.PublishSeconds = pubEnd.Sub(pubStart).Seconds()
	res.PerPublisher = account(r.subs, r.sentTable())
	for _, a := range res.PerPublisher {
		res.Sent += a.Sent
		res.Expected += a.Expected
		res.Received += a.Received
		res.Lost += a.Lost
		res.Duplicated += a.Duplicated
		res.Reordered += a.Reordered
	}
	res.Window = 65535
	var lagSum time.Duration
	var lagN int64
	for _, p := range r.pubs {
		res.Acked += p.acked.Load()
		res.PubFailed += p.failed.Load()
		res.Window = min(res.Window, p.c.Window())
		if p.err != nil {
			r.addError(fmt.Sprintf("publisher %d: acknowledgement", p.idx), p.err)
		}
		lagSum += p.lagSum
		lagN += p.lagN
		res.SendLagMax = max(res.SendLagMax, ms(p.maxLag))
	}
	if c.QoS == 0 {
		res.Window = 0
	}
	if res.Window > 0 && res.Window < c.Inflight {
		// Otherwise a window asked for and not had shows only in the JSON.
		res.Notes = append(res.Notes, fmt.Sprintf("the broker's Receive Maximum capped each publisher's window at %d of the %d asked (--inflight)", res.Window, c.Inflight))
	}
	if lagN > 0 {
		res.SendLagMean = ms(lagSum / time.Duration(lagN))
	}
	var last int64
	if c.Sequenced {
		res.SxIndex = &SeqStats{}
	}
	for _, s := range r.subs {
		res.Foreign += s.foreign
		if s.seq != nil {
			res.SxIndex.add(s.seq.SeqStats)
		}
		last = max(last, s.lastRecv.Load())
	}
	end := pubEnd
	if last > 0 {
		end = time.Unix(0, last)
	}
	res.Seconds = end.Sub(pubStart).Seconds()
	if res.PublishSeconds > 0 {
		res.SendRate = float64(res.Sent) / res.PublishSeconds
	}
	if res.Seconds > 0 {
		res.DeliverRate = float64(res.Received) / res.Seconds
	}
	h := newHistogram()
	for _, s := range r.shards {
		h.Merge(s.h)
	}
	res.Latency = Summarize(h)
	r.cpu(res, before, after, res.Received)
	if c.Rate > 0 && (res.SendRate < 0.95*c.Rate || res.SendLagMean > 5) {
		res.Notes = append(res.Notes, fmt.Sprintf("sent %s msg/s of the %s asked, lagging the schedule by %.1f ms on average (max %.1f ms): the generator or the broker did not keep up",
			num(res.SendRate), num(c.Rate), res.SendLagMean, res.SendLagMax))
	}
	r.finish(res)
	return res
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// header fills the fields that describe the run.
func (r *runner) header() *Result {
	c := &r.cfg
	v := "5"
	if c.Version != 5 {
		v = "3.1.1"
	}
	return &Result{
		Scenario: c.Scenario, URL: c.URL, Version: v, QoS: c.QoS, PayloadSize: c.PayloadSize,
		Pubs: c.Pubs, Subs: c.Subs, Topics: len(r.topics), TargetRate: c.Rate,
	}
}

// cpu fills the generator's and the broker's CPU and memory figures.
func (r *runner) cpu(res *Result, before, after sample, delivered int64) {
	wall := after.at.Sub(before.at).Seconds()
	res.Generator.NumCPU = numCPU()
	if before.genErr == nil && after.genErr == nil && wall > 0 {
		res.Generator.CPUSeconds = (after.gen.CPU - before.gen.CPU).Seconds()
		res.Generator.Cores = res.Generator.CPUSeconds / wall
		res.Generator.Saturated = res.Generator.Cores >= saturation*float64(res.Generator.NumCPU)
	}
	total := res.Generator.Cores
	if before.sysErr == nil && after.sysErr == nil && wall > 0 {
		res.MachineCores = (after.sys.Busy - before.sys.Busy) / wall
	}
	if r.cfg.BrokerPID > 0 {
		if before.brkErr != nil || after.brkErr != nil {
			err := before.brkErr
			if err == nil {
				err = after.brkErr
			}
			r.addError(fmt.Sprintf("broker pid %d", r.cfg.BrokerPID), err)
		} else {
			b := &BrokerStats{PID: r.cfg.BrokerPID, RSSBeforeKiB: before.brk.RSSKiB, RSSAfterKiB: after.brk.RSSKiB}
			b.CPUSeconds = (after.brk.CPU - before.brk.CPU).Seconds()
			if wall > 0 {
				b.Cores = b.CPUSeconds / wall
			}
			if delivered > 0 {
				b.CPUPerMsgUS = b.CPUSeconds * 1e6 / float64(delivered)
			}
			res.Broker = b
			total += b.Cores
		}
	}
	if res.Generator.Saturated {
		res.Notes = append(res.Notes, fmt.Sprintf("the generator saturated the machine: %.2f of %d cores (process CPU / wall time)",
			res.Generator.Cores, res.Generator.NumCPU))
	} else if res.Broker != nil && total >= saturation*float64(res.Generator.NumCPU) {
		res.Notes = append(res.Notes, fmt.Sprintf("generator (%.2f cores) and broker (%.2f cores) together saturated the %d cores: results are CPU-bound",
			res.Generator.Cores, res.Broker.Cores, res.Generator.NumCPU))
	} else if res.MachineCores >= saturation*float64(res.Generator.NumCPU) && res.Broker != nil {
		other := res.MachineCores - total
		res.Notes = append(res.Notes, fmt.Sprintf("the machine's %d cores were saturated (%.2f busy; generator %.2f, broker %.2f, other processes %.2f): results are CPU-bound",
			res.Generator.NumCPU, res.MachineCores, res.Generator.Cores, res.Broker.Cores, other))
	} else if res.MachineCores >= saturation*float64(res.Generator.NumCPU) {
		// Without --broker-pid the broker is not measured apart: it is
		// among the rest of the machine, not at zero.
		res.Notes = append(res.Notes, fmt.Sprintf("the machine's %d cores were saturated (%.2f busy; generator %.2f, the broker and other processes %.2f; --broker-pid measures the broker apart): results are CPU-bound",
			res.Generator.NumCPU, res.MachineCores, res.Generator.Cores, res.MachineCores-res.Generator.Cores))
	} else if res.Generator.Cores >= saturation {
		res.Notes = append(res.Notes, fmt.Sprintf("the generator used %.2f cores (of %d): it may have saturated a core", res.Generator.Cores, res.Generator.NumCPU))
	}
}

func (r *runner) finish(res *Result) {
	r.errMu.Lock()
	defer r.errMu.Unlock()
	res.Errors = append(res.Errors, r.errs...)
	res.ErrorCount = r.errCnt
}
