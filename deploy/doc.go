// Package deploy holds Sextant's deployment files and their tests: the
// container image (Dockerfile, built by scripts/image.sh), a three-node
// compose cluster (compose.yaml), the systemd unit (sextant.service) and
// its configuration (sextant.yaml), and the Prometheus alert rules and
// Grafana dashboard (prometheus-rules.yaml, grafana-dashboard.json);
// docs/operations.md explains them. There is no Go code here: the tests
// build the image and run the compose cluster when a Docker engine is
// reachable, and check that the rules and the dashboard use metrics the
// node exports. Nothing imports this package.
package deploy
