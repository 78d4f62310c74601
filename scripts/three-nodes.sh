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
# MQTT_PORT (1883), CLUSTER_PORT (7946), ADMIN_PORT (8088), LOG_LEVEL (info),
# NODE_ARGS (more `sextant serve` flags for every node, split on spaces),
# N1_ARGS, N2_ARGS, N3_ARGS (for one node), e.g. distances for live placement:
#   NODE_ARGS="--placement-interval 1s" N1_ARGS="--placement-coordinate 0,0" \
#   N2_ARGS="--placement-coordinate 30,30" N3_ARGS="--placement-coordinate 40,0" scripts/three-nodes.sh
#
# Each node must answer on its admin port before the next one starts; a node
# that exits instead (a port in use, a bad data directory) stops the script,
# which prints the end of that node's log and exits non-zero.
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

# healthy IP: the admin API on IP answers GET /healthz with 200.
healthy() {
	local ip=$1 line=""
	{ exec 3<>"/dev/tcp/$ip/$ADMIN_PORT"; } 2>/dev/null || return 1
	printf 'GET /healthz HTTP/1.0\r\nHost: %s\r\n\r\n' "$ip" >&3
	IFS= read -r -t 2 line <&3 || true
	exec 3>&-
	[[ $line == *" 200 "* ]]
}

# failed ID WHY: report a node that did not come up, with its log's end.
failed() {
	echo "$1 $2; the end of its log ($DATA/$1.log):" >&2
	tail -n 20 "$DATA/$1.log" >&2 || true
	exit 1
}

start() { # start ID IP [JOIN]
	local id=$1 ip=$2 join=${3:-} pid own extra
	own=${id^^}_ARGS
	read -r -a extra <<<"${NODE_ARGS:-} ${!own:-}"
	mkdir -p "$DATA/$id"
	"$SEXTANT" serve --node-id "$id" --data-dir "$DATA/$id" --log-level "$LOG_LEVEL" \
		--cluster-addr "$ip:$CLUSTER_PORT" ${join:+--join "$join"} \
		--mqtt-addr "$ip:$MQTT_PORT" --ws-addr "" --admin-addr "$ip:$ADMIN_PORT" \
		${extra[@]+"${extra[@]}"} >"$DATA/$id.log" 2>&1 &
	pid=$!
	pids+=("$pid")
	echo "$pid" >"$DATA/$id.pid"
	for _ in $(seq 1 150); do # 30 s
		if ! kill -0 "$pid" 2>/dev/null; then
			failed "$id" "failed to start"
		fi
		if healthy "$ip"; then
			echo "$id: mqtt $ip:$MQTT_PORT admin $ip:$ADMIN_PORT cluster $ip:$CLUSTER_PORT (log $DATA/$id.log)"
			return
		fi
		sleep 0.2
	done
	failed "$id" "did not answer on $ip:$ADMIN_PORT within 30 s"
}

start n1 127.0.0.1
start n2 127.0.0.2 "127.0.0.1:$CLUSTER_PORT"
start n3 127.0.0.3 "127.0.0.1:$CLUSTER_PORT"
echo "running; Ctrl-C stops the three nodes"
wait
