#!/usr/bin/env bash
# Three Sextant nodes on one machine, each on its own loopback address
# (127.0.0.1, .2, .3; Linux routes all of 127.0.0.0/8 to loopback), joined
# into one cluster. Ctrl-C stops them.
#
#   scripts/three-nodes.sh                  # builds ./cmd/sextant and runs it
#   SEXTANT=/path/to/sextant scripts/three-nodes.sh
#
# Then, for example:
#   mosquitto_sub -h 127.0.0.3 -p 1883 -t 'demo/#' -v &
#   mosquitto_pub -h 127.0.0.2 -p 1883 -t demo/hello -m 'from node 2'
#   go run ./cmd/sextant nodes --admin 127.0.0.1:8088
#
# Environment: SEXTANT (binary), DATA (data directory, default ./three-nodes-data),
# MQTT_PORT (1883), CLUSTER_PORT (7946), ADMIN_PORT (8088), LOG_LEVEL (info).
set -euo pipefail
cd "$(dirname "$0")/.."

DATA=${DATA:-./three-nodes-data}
MQTT_PORT=${MQTT_PORT:-1883}
CLUSTER_PORT=${CLUSTER_PORT:-7946}
ADMIN_PORT=${ADMIN_PORT:-8088}
LOG_LEVEL=${LOG_LEVEL:-info}
if [ -z "${SEXTANT:-}" ]; then
	SEXTANT=$DATA/sextant
	mkdir -p "$DATA"
	go build -o "$SEXTANT" ./cmd/sextant
fi

pids=()
stop() { kill "${pids[@]}" 2>/dev/null || true; wait 2>/dev/null || true; }
trap stop EXIT INT TERM

start() { # start ID IP [JOIN]
	local id=$1 ip=$2 join=${3:-}
	mkdir -p "$DATA/$id"
	"$SEXTANT" serve --node-id "$id" --data-dir "$DATA/$id" --log-level "$LOG_LEVEL" \
		--cluster-addr "$ip:$CLUSTER_PORT" ${join:+--join "$join"} \
		--mqtt-addr "$ip:$MQTT_PORT" --ws-addr "" --admin-addr "$ip:$ADMIN_PORT" \
		>"$DATA/$id.log" 2>&1 &
	pids+=($!)
	echo $! >"$DATA/$id.pid"
	echo "$id: mqtt $ip:$MQTT_PORT admin $ip:$ADMIN_PORT cluster $ip:$CLUSTER_PORT (log $DATA/$id.log)"
}

start n1 127.0.0.1
start n2 127.0.0.2 "127.0.0.1:$CLUSTER_PORT"
start n3 127.0.0.3 "127.0.0.1:$CLUSTER_PORT"
echo "running; Ctrl-C stops the three nodes"
wait
