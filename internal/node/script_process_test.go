package node_test

import (
	"bytes"
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sextantmq/sextant/internal/brokertest"
)

// TestThreeNodeScriptStopsWhenANodeFails: scripts/three-nodes.sh waits
// for each node to answer; when one exits instead (here: its admin port is
// taken), the script stops the others, prints that node's error and exits
// non-zero rather than reporting "running".
func TestThreeNodeScriptStopsWhenANodeFails(t *testing.T) {
	if testing.Short() {
		t.Skip("runs sextant processes")
	}
	bin := brokertest.BuildSextant(t)
	mqttPort, clusterPort, adminPort := freePortOnAll(t, false), freePortOnAll(t, true), freePortOnAll(t, false)
	taken, err := net.Listen("tcp", "127.0.0.2:"+adminPort)
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	data := t.TempDir()
	script := exec.CommandContext(ctx, "bash", filepath.Join(brokertest.ModuleRoot(t), "scripts", "three-nodes.sh"))
	script.Env = append(os.Environ(), "SEXTANT="+bin, "DATA="+data, "MQTT_PORT="+mqttPort,
		"CLUSTER_PORT="+clusterPort, "ADMIN_PORT="+adminPort, "LOG_LEVEL=warn")
	var stdout, stderr bytes.Buffer
	script.Stdout, script.Stderr = &stdout, &stderr
	err = script.Run()
	if err == nil || ctx.Err() != nil {
		t.Fatalf("the script exited with %v (context %v); want a failure\nstdout:\n%s\nstderr:\n%s", err, ctx.Err(), stdout.String(), stderr.String())
	}
	if strings.Contains(stdout.String(), "running") || !strings.Contains(stderr.String(), "n2 failed to start") ||
		!strings.Contains(stderr.String(), "address already in use") {
		t.Fatalf("stdout:\n%s\nstderr:\n%s\nwant n2's failure and its error, and no \"running\"", stdout.String(), stderr.String())
	}
}
