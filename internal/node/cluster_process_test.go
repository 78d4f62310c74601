package node_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sextantmq/sextant/internal/adminapi"
	"github.com/sextantmq/sextant/internal/brokertest"
)

// freePortOnAll returns a port free for TCP (and UDP) on 127.0.0.1, .2 and .3.
func freePortOnAll(t *testing.T, udp bool) string {
	t.Helper()
	return brokertest.FreePort(t, udp, "127.0.0.1", "127.0.0.2", "127.0.0.3")
}

// TestThreeProcessesKeepRoutingAfterKill9 runs the README's three-node
// quick start (scripts/three-nodes.sh), routes messages between nodes with
// mosquitto_sub and mosquitto_pub, kills a node with SIGKILL, and checks the
// other two keep routing.
func TestThreeProcessesKeepRoutingAfterKill9(t *testing.T) {
	if testing.Short() {
		t.Skip("runs three sextant processes")
	}
	mq := brokertest.RequireMosquitto(t)
	_, data, mqttPort, adminPort := startThreeNodes(t, "warn")

	// All three alive in every node's view.
	admin := func(ip string) string { return "http://" + ip + ":" + adminPort }
	brokertest.Eventually(t, 60*time.Second, func() bool {
		return aliveEverywhere([]string{admin("127.0.0.1"), admin("127.0.0.2"), admin("127.0.0.3")}, 3)
	}, "three nodes alive in every node's view")

	route := func(subIP, pubIP, topic string) {
		t.Helper()
		mq.Route(t, subIP+":"+mqttPort, pubIP+":"+mqttPort, topic, 20)
	}

	// Each node measures its peer links' round trips (every 5 s).
	brokertest.Eventually(t, 30*time.Second, func() bool {
		var nodes []adminapi.NodeInfo
		if err := getJSON(admin("127.0.0.2")+"/v1/nodes", &nodes); err != nil {
			return false
		}
		for _, n := range nodes {
			if n.ID == "n2" {
				return n.MeasuredMs["n1"] > 0 && n.MeasuredMs["n3"] > 0 && n.RTTms["n3"] > 0
			}
		}
		return false
	}, "n2 reports measured and estimated RTTs to its peers")

	route("127.0.0.3", "127.0.0.2", "before")
	route("127.0.0.1", "127.0.0.3", "before1")

	pidText, err := os.ReadFile(filepath.Join(data, "n1.pid"))
	if err != nil {
		t.Fatal(err)
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(pidText)))
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}

	route("127.0.0.3", "127.0.0.2", "after")
	route("127.0.0.2", "127.0.0.3", "after2")
}

// aliveEverywhere reports whether every node, asked through its admin API
// URL, sees want members alive.
func aliveEverywhere(admins []string, want int) bool {
	for _, a := range admins {
		var nodes []adminapi.NodeInfo
		if err := getJSON(a+"/v1/nodes", &nodes); err != nil {
			return false
		}
		alive := 0
		for _, n := range nodes {
			if n.State == "alive" {
				alive++
			}
		}
		if alive != want {
			return false
		}
	}
	return true
}

func getJSON(url string, v any) error {
	c := http.Client{Timeout: 2 * time.Second}
	res, err := c.Get(url)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	if res.StatusCode != 200 {
		return fmt.Errorf("%s: %s", url, res.Status)
	}
	return json.NewDecoder(res.Body).Decode(v)
}

// startThreeNodes runs the README's three-node quick start
// (scripts/three-nodes.sh) on free ports, stopped at cleanup (with the
// nodes' logs when the test failed). It returns the binary, the data
// directory and the MQTT and admin ports every node listens on. env adds
// to the script's environment (NODE_ARGS, N1_ARGS...: more flags).
func startThreeNodes(t *testing.T, logLevel string, env ...string) (bin, data, mqttPort, adminPort string) {
	t.Helper()
	bin = brokertest.BuildSextant(t)
	data = t.TempDir()
	mqttPort, clusterPort, adminPort := freePortOnAll(t, false), freePortOnAll(t, true), freePortOnAll(t, false)
	script := exec.Command("bash", filepath.Join(brokertest.ModuleRoot(t), "scripts", "three-nodes.sh"))
	script.Env = append(os.Environ(), "SEXTANT="+bin, "DATA="+data, "MQTT_PORT="+mqttPort,
		"CLUSTER_PORT="+clusterPort, "ADMIN_PORT="+adminPort, "LOG_LEVEL="+logLevel)
	script.Env = append(script.Env, env...)
	script.Stdout, script.Stderr = io.Discard, io.Discard
	if err := script.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = script.Process.Signal(syscall.SIGTERM)
		_ = script.Wait()
		if t.Failed() {
			for _, id := range []string{"n1", "n2", "n3"} {
				b, _ := os.ReadFile(filepath.Join(data, id+".log"))
				t.Logf("%s log:\n%s", id, b)
			}
		}
	})
	return bin, data, mqttPort, adminPort
}
