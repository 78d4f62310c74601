package node_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sextantmq/sextant/internal/brokertest"
)

// requireNetAdmin skips the test (fails it under CI=true) unless this
// process may create network namespaces and run iptables in them: root,
// with iproute2 and iptables installed.
func requireNetAdmin(t *testing.T) {
	t.Helper()
	fail := t.Skipf
	if os.Getenv("CI") == "true" {
		fail = t.Fatalf
	}
	ip := brokertest.RequireTool(t, "ip", "iproute2")
	brokertest.RequireTool(t, "iptables", "iptables")
	if os.Geteuid() != 0 {
		fail("needs root to create network namespaces and run iptables in them")
		return
	}
	ns := fmt.Sprintf("sxprobe%d", os.Getpid())
	if out, err := exec.Command(ip, "netns", "add", ns).CombinedOutput(); err != nil {
		fail("cannot create a network namespace (ip netns add): %v: %s", err, out)
		return
	}
	_ = exec.Command(ip, "netns", "del", ns).Run()
}

// TestProcessPartialPartitionLosesNothing runs scripts/partial-partition.sh
// with the sextant built from this tree: three `sextant serve` processes in
// network namespaces of their own, a persistent QoS 1 subscriber
// (mosquitto_sub) on n1, mosquitto_pub -l at QoS 1 on n2 sending 1,500
// messages at about 200 a second, and n1 cut from n2 by iptables for 8 s
// while n3 reaches both. Every acknowledged message must arrive, once and
// in order. (Before acknowledged forwarding and transit, 1,420 of 1,500
// arrived.)
func TestProcessPartialPartitionLosesNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("runs three sextant processes in network namespaces for about 15 s")
	}
	requireNetAdmin(t)
	brokertest.RequireMosquitto(t)
	bin := brokertest.BuildSextant(t)
	out := t.TempDir()
	cmd := exec.Command("bash", filepath.Join(brokertest.ModuleRoot(t), "scripts", "partial-partition.sh"))
	cmd.Env = append(os.Environ(), "SEXTANT="+bin, "OUT="+out, "KEEP=1")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	res, err := cmd.Output()
	if err != nil {
		t.Fatalf("partial-partition.sh: %v\n%s", err, stderr.String())
	}
	line := strings.TrimSpace(string(res))
	t.Log(line)
	var published, acked, received, distinct, dups, reordered, during int
	if _, err := fmt.Sscanf(line, "published %d acknowledged %d received %d distinct %d duplicates %d reordered %d during-cut %d",
		&published, &acked, &received, &distinct, &dups, &reordered, &during); err != nil {
		t.Fatalf("cannot read the script's result %q: %v\n%s", line, err, stderr.String())
	}
	if acked != published {
		t.Errorf("the publisher got %d acknowledgements for %d messages", acked, published)
	}
	if distinct != published || dups != 0 || reordered != 0 {
		t.Errorf("the subscriber got %d of %d messages, %d duplicates, %d out of order", distinct, published, dups, reordered)
	}
	if t.Failed() {
		for _, id := range []string{"n1", "n2", "n3"} {
			b, _ := os.ReadFile(filepath.Join(out, id+".log"))
			t.Logf("%s log:\n%s", id, b)
		}
	}
}
