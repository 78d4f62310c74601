// Command seqcluster measures sequenced topics on a cluster of three real
// `sextant serve` processes on 127.0.0.1..3 (scripts/bench-sequenced.sh
// runs it):
//
//	-mode failover  kill -9 of a replicas-3 group's home, -kills rounds (failover.go)
//	-mode idle      idle CPU and memory per placement group, and -topics idle
//	                topics with replicas 3 sharing -groups groups (idle.go)
//	-mode replay    replay throughput from disk: sx-from=earliest over a log
//	                of -records records (replay.go)
//
// Usage: go run ./scripts/seqcluster -sextant BIN -mode MODE [flags] [-out DIR]
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

const (
	mqttPort    = 26883
	adminPort   = 26884
	clusterPort = 26946
	nodes       = 3
)

var (
	bin     = flag.String("sextant", "", "sextant binary")
	mode    = flag.String("mode", "failover", "failover, idle or replay")
	kills   = flag.Int("kills", 20, "failover: rounds (one kill -9 of a home each)")
	rate    = flag.Float64("rate", 1000, "failover: publishes per second during a round")
	topics  = flag.Int("topics", 1000, "idle: sequenced topics")
	groups  = flag.Int("groups", 100, "idle: placement groups the topics share (the rule's group template)")
	window  = flag.Duration("window", 30*time.Second, "idle: how long CPU is measured")
	records = flag.Int("records", 200000, "replay: records in the log")
	out     = flag.String("out", "", "directory for data, logs and results (default a new temporary one)")
	extra   = flag.String("node-args", "", "extra flags for every node, space separated")
)

func main() {
	flag.Parse()
	if *bin == "" {
		fmt.Fprintln(os.Stderr, "seqcluster: -sextant BIN is required")
		os.Exit(2)
	}
	if *out == "" {
		d, err := os.MkdirTemp("", "sextant-seqcluster.")
		check(err)
		*out = d
	}
	ns := make([]*node, nodes)
	for i := range ns {
		ns[i] = &node{id: fmt.Sprintf("f%d", i+1), ip: fmt.Sprintf("127.0.0.%d", i+1), dir: filepath.Join(*out, fmt.Sprintf("f%d", i+1))}
	}
	stopNodes = func() {
		for _, n := range ns {
			n.stop(syscall.SIGTERM)
		}
	}
	defer cleanup()
	// Stopped from outside (Ctrl-C, timeout): stop the nodes first.
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	go func() {
		<-sigs
		cleanup()
		os.Exit(1)
	}()
	for i, n := range ns {
		join := ""
		if i > 0 {
			join = fmt.Sprintf("127.0.0.1:%d", clusterPort)
		}
		check(n.start(join))
		check(waitAlive(ns[0], i+1, 60*time.Second))
	}
	switch *mode {
	case "failover":
		failover(ns)
	case "idle":
		idle(ns)
	case "replay":
		replay(ns)
	default:
		check(fmt.Errorf("unknown -mode %q", *mode))
	}
}

type node struct {
	id, ip, dir string
	cmd         *exec.Cmd
	done        chan struct{}
	log         *os.File
}

func (n *node) mqtt() string  { return fmt.Sprintf("mqtt://%s:%d", n.ip, mqttPort) }
func (n *node) admin() string { return fmt.Sprintf("http://%s:%d", n.ip, adminPort) }

func (n *node) start(join string) error {
	if err := os.MkdirAll(n.dir, 0o750); err != nil {
		return err
	}
	args := []string{"serve", "--node-id", n.id, "--data-dir", n.dir, "--log-level", "warn",
		"--cluster-addr", fmt.Sprintf("%s:%d", n.ip, clusterPort),
		"--mqtt-addr", fmt.Sprintf("%s:%d", n.ip, mqttPort), "--ws-addr", "", "--admin-addr", fmt.Sprintf("%s:%d", n.ip, adminPort)}
	if join != "" {
		args = append(args, "--join", join)
	}
	if *extra != "" {
		args = append(args, strings.Fields(*extra)...)
	}
	lf, err := os.OpenFile(n.dir+".log", os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command(*bin, args...)
	cmd.Stdout, cmd.Stderr = lf, lf
	if err := cmd.Start(); err != nil {
		_ = lf.Close()
		return err
	}
	n.cmd, n.log, n.done = cmd, lf, make(chan struct{})
	go func(done chan struct{}) { _ = cmd.Wait(); close(done) }(n.done)
	return nil
}

func (n *node) stop(sig syscall.Signal) {
	if n.cmd == nil {
		return
	}
	_ = n.cmd.Process.Signal(sig)
	select {
	case <-n.done:
	case <-time.After(10 * time.Second):
		_ = n.cmd.Process.Kill()
		<-n.done
	}
	_ = n.log.Close()
	n.cmd = nil
}

// waitAlive waits until n's admin API lists want alive nodes.
func waitAlive(n *node, want int, d time.Duration) error {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		resp, err := http.Get(n.admin() + "/v1/nodes")
		if err == nil {
			var list []struct {
				State string `json:"state"`
			}
			err = json.NewDecoder(resp.Body).Decode(&list)
			_ = resp.Body.Close()
			alive := 0
			for _, x := range list {
				if x.State == "alive" {
					alive++
				}
			}
			if err == nil && alive == want {
				return nil
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("%s: %d nodes not alive within %v", n.id, want, d)
}

func setPolicy(n *node, body string) error {
	req, err := http.NewRequest(http.MethodPut, n.admin()+"/v1/policies", strings.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("PUT /v1/policies: %s", resp.Status)
	}
	return nil
}

// cleanup stops the nodes; check runs it before exiting on an error. It
// runs once.
var (
	cleanupOnce sync.Once
	stopNodes   = func() {}
)

func cleanup() { cleanupOnce.Do(stopNodes) }

func check(err error) {
	if err != nil {
		fmt.Fprintf(os.Stderr, "seqcluster: %v\n", err)
		cleanup()
		os.Exit(1)
	}
}
