package main

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/sextantmq/sextant/internal/mqtt/packet"
	"github.com/sextantmq/sextant/internal/mqttclient"
)

func failover(ns []*node) {
	check(setPolicy(ns[0], `{"rules":[{"match":"sxfo/#","mode":"sequenced","replicas":3}]}`))
	time.Sleep(time.Second) // every node's metadata copy has the rule
	var results []round
	for k := range *kills {
		victim, pubNode, subNode := ns[k%nodes], ns[(k+1)%nodes], ns[(k+2)%nodes]
		r, err := runRound(k, victim, pubNode, subNode)
		if err != nil {
			fmt.Fprintf(os.Stderr, "seqcluster: round %d: %v\n", k+1, err)
			r.Err = err.Error()
		}
		results = append(results, r)
		fmt.Fprintf(os.Stderr, "round %2d: killed %s: ack after %7.1f ms, delivery after %7.1f ms, acked %d, lost %d, duplicated %d%s\n",
			k+1, victim.id, r.AckMS, r.DeliverMS, r.Acked, r.Lost, r.Duplicated, errNote(r.Err))
		// Bring the victim back before the next round.
		join := fmt.Sprintf("%s:%d", pubNode.ip, clusterPort)
		if err := victim.start(join); err == nil {
			err = waitAlive(pubNode, nodes, 60*time.Second)
			if err != nil {
				fmt.Fprintf(os.Stderr, "seqcluster: %s did not rejoin: %v\n", victim.id, err)
			}
		} else {
			check(err)
		}
		time.Sleep(2 * time.Second) // its replicas catch up
	}
	report(results)
}

func errNote(s string) string {
	if s == "" {
		return ""
	}
	return " (" + s + ")"
}

// round is one kill's figures.
type round struct {
	Victim     string  `json:"victim"`
	AckMS      float64 `json:"ack_ms"`     // kill -> first PUBACK of a publish sent after it
	DeliverMS  float64 `json:"deliver_ms"` // kill -> first delivery of a message sent after it
	Sent       int     `json:"sent"`
	Acked      int     `json:"acked"`
	Lost       int     `json:"lost"` // acknowledged, never delivered
	Duplicated int     `json:"duplicated"`
	Err        string  `json:"error,omitempty"`
}

func runRound(k int, victim, pubNode, subNode *node) (round, error) {
	r := round{Victim: victim.id}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	topic := fmt.Sprintf("sxfo/k%d-%d", k, time.Now().UnixNano())
	id := fmt.Sprintf("sxfo-%d-%d", k, time.Now().UnixNano()%1e6)

	var mu sync.Mutex
	delivered := map[uint64]int{}
	var firstDeliverAfter time.Time
	var killAt time.Time
	sub, err := mqttclient.Dial(ctx, subNode.mqtt(), mqttclient.Options{ClientID: id + "-s", KeepAlive: 30 * time.Second,
		OnPublish: func(p *packet.Publish) {
			if len(p.Payload) < 16 {
				return
			}
			now := time.Now()
			seq := binary.BigEndian.Uint64(p.Payload)
			sent := time.Unix(0, int64(binary.BigEndian.Uint64(p.Payload[8:])))
			mu.Lock()
			delivered[seq]++
			if !killAt.IsZero() && firstDeliverAfter.IsZero() && !sent.Before(killAt) {
				firstDeliverAfter = now
			}
			mu.Unlock()
		}})
	if err != nil {
		return r, err
	}
	defer sub.Close()
	if _, err := sub.Subscribe(ctx, &packet.Subscribe{Subs: []packet.Subscription{{Filter: topic, QoS: 1}}}); err != nil {
		return r, err
	}
	// The group's first publish, through the victim: it becomes the home.
	creator, err := mqttclient.Dial(ctx, victim.mqtt(), mqttclient.Options{ClientID: id + "-c", KeepAlive: 30 * time.Second})
	if err != nil {
		return r, err
	}
	err = creator.Publish(ctx, &packet.Publish{Topic: topic, QoS: 1, Payload: []byte("create")})
	_ = creator.Close()
	if err != nil {
		return r, fmt.Errorf("create the group through %s: %w", victim.id, err)
	}
	pub, err := mqttclient.Dial(ctx, pubNode.mqtt(), mqttclient.Options{ClientID: id + "-p", KeepAlive: 30 * time.Second, MaxInflight: 1000})
	if err != nil {
		return r, err
	}
	defer pub.Close()

	acked := map[uint64]bool{}
	var firstAckAfter time.Time
	var sentAfterKill uint64 = ^uint64(0) // first seq sent at or after the kill
	var wg sync.WaitGroup
	stop := make(chan struct{})
	interval := time.Duration(float64(time.Second) / *rate)
	var sent uint64
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(interval)
		defer t.Stop()
		for seq := uint64(0); ; seq++ {
			select {
			case <-stop:
				mu.Lock()
				sent = seq
				mu.Unlock()
				return
			case <-t.C:
			}
			now := time.Now()
			payload := make([]byte, 64)
			binary.BigEndian.PutUint64(payload, seq)
			binary.BigEndian.PutUint64(payload[8:], uint64(now.UnixNano()))
			mu.Lock()
			if !killAt.IsZero() && sentAfterKill == ^uint64(0) {
				sentAfterKill = seq
			}
			mu.Unlock()
			err := pub.PublishAsync(ctx, &packet.Publish{Topic: topic, QoS: 1, Payload: payload}, func(err error) {
				if err != nil {
					return
				}
				now := time.Now()
				mu.Lock()
				acked[seq] = true
				if seq >= sentAfterKill && firstAckAfter.IsZero() {
					firstAckAfter = now
				}
				mu.Unlock()
			})
			if err != nil {
				mu.Lock()
				sent = seq
				mu.Unlock()
				return
			}
		}
	}()
	// Let the group settle (its first leader hands the lead to the home)
	// and acknowledgements flow.
	time.Sleep(1500 * time.Millisecond)
	mu.Lock()
	n := len(acked)
	mu.Unlock()
	if n == 0 {
		close(stop)
		wg.Wait()
		return r, errors.New("no publish acknowledged before the kill")
	}
	mu.Lock()
	killAt = time.Now()
	mu.Unlock()
	victim.stop(syscall.SIGKILL)
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		mu.Lock()
		done := !firstAckAfter.IsZero() && !firstDeliverAfter.IsZero()
		mu.Unlock()
		if done {
			break
		}
		time.Sleep(time.Millisecond)
	}
	time.Sleep(500 * time.Millisecond)
	close(stop)
	wg.Wait()
	// Wait for the outstanding acknowledgements and deliveries.
	for range 100 {
		mu.Lock()
		settled := uint64(len(acked)) == sent && len(delivered) >= len(acked)
		mu.Unlock()
		if settled {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	mu.Lock()
	defer mu.Unlock()
	r.Sent, r.Acked = int(sent), len(acked)
	for seq := range acked {
		if delivered[seq] == 0 {
			r.Lost++
		}
	}
	for _, c := range delivered {
		if c > 1 {
			r.Duplicated += c - 1
		}
	}
	if firstAckAfter.IsZero() {
		return r, errors.New("no publish sent after the kill was acknowledged within 20 s")
	}
	r.AckMS = ms(firstAckAfter.Sub(killAt))
	if !firstDeliverAfter.IsZero() {
		r.DeliverMS = ms(firstDeliverAfter.Sub(killAt))
	}
	return r, nil
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func report(rs []round) {
	var acks, dels []float64
	lost, dups, failed := 0, 0, 0
	for _, r := range rs {
		if r.Err != "" && r.AckMS == 0 {
			failed++
			continue
		}
		acks = append(acks, r.AckMS)
		if r.DeliverMS > 0 {
			dels = append(dels, r.DeliverMS)
		}
		lost += r.Lost
		dups += r.Duplicated
	}
	b, _ := json.MarshalIndent(rs, "", "  ")
	_ = os.WriteFile(filepath.Join(*out, "failover.json"), b, 0o644)
	fmt.Printf("kills: %d (%d without a measurement), rate %.0f msg/s QoS 1, replicas 3 on 3 nodes\n", len(rs), failed, *rate)
	fmt.Printf("kill -> first PUBACK of a publish sent after the kill: %s\n", stats(acks))
	fmt.Printf("kill -> first delivery of a message sent after the kill: %s\n", stats(dels))
	fmt.Printf("acknowledged but not delivered: %d; delivered twice: %d\n", lost, dups)
	fmt.Printf("results in %s\n", *out)
}

func stats(v []float64) string {
	if len(v) == 0 {
		return "no samples"
	}
	slices.Sort(v)
	q := func(p float64) float64 { return v[min(len(v)-1, int(p*float64(len(v))))] }
	med := v[len(v)/2]
	if len(v)%2 == 0 {
		med = (v[len(v)/2-1] + v[len(v)/2]) / 2
	}
	return fmt.Sprintf("median %.0f ms, p90 %.0f ms, min %.0f ms, max %.0f ms (n=%d)", med, q(0.9), v[0], v[len(v)-1], len(v))
}
