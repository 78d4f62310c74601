package deploy_test

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sextantmq/sextant/internal/adminapi"
	"github.com/sextantmq/sextant/internal/brokertest"
)

// maxImageBytes is the size the image must stay under.
const maxImageBytes = 25 << 20

// requireDocker returns the compose command (docker compose v2, else
// docker-compose 1.x), or skips the test when no Docker engine answers
// (fails under CI=true).
func requireDocker(t *testing.T) []string {
	t.Helper()
	missing := func(format string, args ...any) {
		t.Helper()
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI=true: "+format, args...)
		}
		t.Skipf(format, args...)
	}
	if _, err := exec.LookPath("docker"); err != nil {
		missing("docker not found; install docker.io (and docker-compose) to run this test")
	}
	if out, err := exec.Command("docker", "info", "--format", "{{.ServerVersion}}").CombinedOutput(); err != nil {
		missing("no Docker engine reachable (docker info: %v: %s)", err, strings.TrimSpace(string(out)))
	}
	if exec.Command("docker", "compose", "version").Run() == nil {
		return []string{"docker", "compose"}
	}
	if p, err := exec.LookPath("docker-compose"); err == nil {
		return []string{p}
	}
	missing("neither docker compose (v2) nor docker-compose found; install docker-compose")
	return nil
}

// run runs a command and fails the test with its output if it fails.
func run(t *testing.T, env []string, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

func freeHostPort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", ":0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
}

// freeSubnet picks 172.31.X.0/24 not used by an existing Docker network.
func freeSubnet(t *testing.T, rng *rand.Rand) string {
	t.Helper()
	used := run(t, nil, "sh", "-c", `docker network ls -q | xargs -r docker network inspect -f '{{range .IPAM.Config}}{{.Subnet}} {{end}}'`)
	for range 50 {
		prefix := fmt.Sprintf("172.31.%d", 100+rng.IntN(150))
		if !strings.Contains(used, prefix+".") {
			return prefix
		}
	}
	t.Fatal("no free 172.31.x.0/24 subnet")
	return ""
}

// TestImageAndComposeCluster builds the image with scripts/image.sh, checks
// its size and that it runs as a non-root user, starts deploy/compose.yaml
// (three nodes), routes messages between nodes with mosquitto_pub and
// mosquitto_sub, stops one container and checks the other two keep
// routing.
func TestImageAndComposeCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a container image and runs a compose cluster")
	}
	compose := requireDocker(t)
	mq := brokertest.RequireMosquitto(t, "-V", "5")
	root := brokertest.ModuleRoot(t)
	seed := time.Now().UnixNano()
	t.Logf("seed %d (image tag, project name, subnet)", seed)
	rng := rand.New(rand.NewPCG(uint64(seed), 0))
	tag := fmt.Sprintf("sextant-test:%x", rng.Uint32())
	project := fmt.Sprintf("sextanttest%x", rng.Uint32())

	built := time.Now()
	run(t, []string{"IMAGE=" + tag}, filepath.Join(root, "scripts", "image.sh"))
	t.Cleanup(func() { _ = exec.Command("docker", "rmi", "-f", tag).Run() })
	t.Logf("image %s built in %v", tag, time.Since(built).Round(time.Millisecond))
	var img struct {
		Size   int64
		Config struct{ User string }
	}
	if err := json.Unmarshal([]byte(run(t, nil, "docker", "image", "inspect", "--format", "{{json .}}", tag)), &img); err != nil {
		t.Fatal(err)
	}
	t.Logf("image size %.1f MB, user %q", float64(img.Size)/(1<<20), img.Config.User)
	if img.Size >= maxImageBytes {
		t.Errorf("image is %d bytes, over %d", img.Size, maxImageBytes)
	}
	if img.Config.User == "" || strings.HasPrefix(img.Config.User, "0") || strings.HasPrefix(img.Config.User, "root") {
		t.Errorf("image runs as %q, want a non-root user", img.Config.User)
	}

	ports := []string{freeHostPort(t), freeHostPort(t), freeHostPort(t)}
	env := []string{"SEXTANT_IMAGE=" + tag, "SEXTANT_NET=" + freeSubnet(t, rng),
		"SEXTANT_MQTT_PORT_1=" + ports[0], "SEXTANT_MQTT_PORT_2=" + ports[1], "SEXTANT_MQTT_PORT_3=" + ports[2]}
	dc := func(args ...string) string {
		t.Helper()
		all := append(append(compose[1:len(compose):len(compose)], "-p", project, "-f", filepath.Join(root, "deploy", "compose.yaml")), args...)
		return run(t, env, compose[0], all...)
	}
	t.Cleanup(func() {
		if t.Failed() {
			cmd := exec.Command(compose[0], append(compose[1:len(compose):len(compose)], "-p", project, "-f", filepath.Join(root, "deploy", "compose.yaml"), "logs", "--no-color", "--tail", "60")...)
			cmd.Env = append(os.Environ(), env...)
			out, _ := cmd.CombinedOutput()
			t.Logf("compose logs:\n%s", out)
		}
		cmd := exec.Command(compose[0], append(compose[1:len(compose):len(compose)], "-p", project, "-f", filepath.Join(root, "deploy", "compose.yaml"), "down", "-v", "-t", "30", "--remove-orphans")...)
		cmd.Env = append(os.Environ(), env...)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Logf("compose down: %v\n%s", err, out)
		}
	})
	dc("up", "-d")
	container := func(service string) string { return dc("ps", "-q", service) }
	ids := map[string]string{}
	for _, s := range []string{"node1", "node2", "node3"} {
		ids[s] = container(s)
	}
	brokertest.Eventually(t, 120*time.Second, func() bool {
		for _, id := range ids {
			if out, err := exec.Command("docker", "inspect", "--format", "{{.State.Health.Status}}", id).Output(); err != nil || strings.TrimSpace(string(out)) != "healthy" {
				return false
			}
		}
		var nodes []adminapi.NodeInfo
		out, err := exec.Command("docker", "exec", ids["node1"], "/usr/bin/sextant", "nodes", "--json").Output()
		if err != nil || json.Unmarshal(out, &nodes) != nil {
			return false
		}
		alive := 0
		for _, n := range nodes {
			if n.State == "alive" {
				alive++
			}
		}
		return alive == 3
	}, "three healthy containers whose nodes see each other")

	// The node process runs as the image's user, not as root.
	for s, id := range ids {
		top := strings.Split(run(t, nil, "docker", "top", id, "-o", "pid,uid,comm"), "\n")
		for _, line := range top[1:] {
			if f := strings.Fields(line); len(f) < 3 || f[1] != "65532" {
				t.Errorf("%s runs a process as another user: %q", s, line)
			}
		}
		if len(top) < 2 {
			t.Errorf("%s: no process in docker top", s)
		}
	}

	route := func(subPort, pubPort, topic string) {
		t.Helper()
		mq.Route(t, "127.0.0.1:"+subPort, "127.0.0.1:"+pubPort, topic, 10)
	}
	route(ports[2], ports[0], "compose/core-to-edge")
	route(ports[1], ports[2], "compose/edge-to-core")

	stopped := time.Now()
	dc("stop", "node2")
	t.Logf("node2 stopped (drained on SIGTERM) in %v", time.Since(stopped).Round(time.Millisecond))
	route(ports[2], ports[0], "compose/after-stop")
	route(ports[0], ports[2], "compose/after-stop-back")
}
