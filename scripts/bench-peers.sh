#!/usr/bin/env bash
# bench-peers.sh: run the same `sextant bench` scenario suite against Sextant,
# Mosquitto and nats-server (its MQTT listener) on this machine, alternating
# brokers between repetitions, and print a Markdown table of medians with the
# ratios Sextant/peer. See BENCHMARKS.md for the method and its caveats.
#
# Usage: scripts/bench-peers.sh [-r REPS] [-d DURATION] [-o OUTDIR] [-s SCENARIOS]
#   -r REPS       repetitions per broker (default 3, at least 3 for a median)
#   -d DURATION   publishing time of the throughput scenarios (default 5s)
#   -o OUTDIR     where raw JSON, logs and the table go (default $TMPDIR/sextant-bench-DATE)
#   -s SCENARIOS  comma-separated subset of the suite (default: all)
#
# Needs Go (to build sextant) and apt-get (to install mosquitto and
# nats-server if they are missing). Brokers listen on 127.0.0.1 only, on
# ports 21883 (Sextant), 21884 (Mosquitto) and 21885 (NATS MQTT); a broker
# is started fresh for every scenario run and stopped after it.
set -euo pipefail

REPS=3
DUR=5s
OUT=""
ONLY=""
while getopts "r:d:o:s:h" opt; do
	case $opt in
	r) REPS=$OPTARG ;;
	d) DUR=$OPTARG ;;
	o) OUT=$OPTARG ;;
	s) ONLY=$OPTARG ;;
	*) sed -n '2,18p' "$0"; exit 2 ;;
	esac
done

ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUT=${OUT:-${TMPDIR:-/tmp}/sextant-bench-$(date -u +%Y%m%dT%H%M%SZ)}
mkdir -p "$OUT/raw" "$OUT/logs"
WORK=$(mktemp -d)
trap 'stop_broker; rm -rf "$WORK"' EXIT

SX_PORT=21883
MQ_PORT=21884
NATS_PORT=21885
NATS_CLIENT_PORT=24222

log() { printf '%s %s\n' "$(date -u +%H:%M:%S)" "$*" >&2; }

# --- install peers -----------------------------------------------------------
need_apt=()
command -v mosquitto >/dev/null 2>&1 || [ -x /usr/sbin/mosquitto ] || need_apt+=(mosquitto)
command -v nats-server >/dev/null 2>&1 || [ -x /usr/sbin/nats-server ] || need_apt+=(nats-server)
if [ ${#need_apt[@]} -gt 0 ]; then
	SUDO=""
	[ "$(id -u)" -ne 0 ] && SUDO=sudo
	log "installing ${need_apt[*]} with apt-get"
	$SUDO apt-get update -qq
	$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_apt[@]}"
fi
PATH=$PATH:/usr/sbin:/usr/local/sbin
MOSQUITTO=$(command -v mosquitto)
NATS=$(command -v nats-server)

# --- build sextant -----------------------------------------------------------
log "building sextant"
(cd "$ROOT" && go build -o "$OUT/sextant" ./cmd/sextant)
SX=$OUT/sextant

# Many connections: raise the open-file limit as far as allowed.
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true

# --- broker configs (stated in BENCHMARKS.md) --------------------------------
cat >"$WORK/mosquitto.conf" <<EOF
listener $MQ_PORT 127.0.0.1
allow_anonymous true
set_tcp_nodelay true
persistence false
log_dest none
EOF
[ "$(id -u)" -eq 0 ] && echo "user root" >>"$WORK/mosquitto.conf"

cat >"$WORK/nats.conf" <<EOF
listen: 127.0.0.1:$NATS_CLIENT_PORT
server_name: sxbench
jetstream {
  store_dir: "$WORK/nats-js"
}
mqtt {
  listen: 127.0.0.1:$NATS_PORT
}
EOF
cp "$WORK/mosquitto.conf" "$WORK/nats.conf" "$OUT/logs/"

BROKER_PID=""
wait_port() {
	local port=$1 i
	for i in $(seq 1 100); do
		if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then return 0; fi
		sleep 0.1
	done
	log "broker on port $port did not come up"
	return 1
}

start_broker() { # name rep
	local name=$1 rep=$2
	case $name in
	sextant)
		rm -rf "$WORK/sx-data"
		"$SX" serve --data-dir "$WORK/sx-data" --mqtt-addr "127.0.0.1:$SX_PORT" --ws-addr "" \
			--admin-addr "" --log-level warn >>"$OUT/logs/sextant.$rep.log" 2>&1 &
		BROKER_PID=$!
		PORT=$SX_PORT ;;
	mosquitto)
		"$MOSQUITTO" -c "$WORK/mosquitto.conf" >>"$OUT/logs/mosquitto.$rep.log" 2>&1 &
		BROKER_PID=$!
		PORT=$MQ_PORT ;;
	nats)
		rm -rf "$WORK/nats-js"
		"$NATS" -c "$WORK/nats.conf" >>"$OUT/logs/nats.$rep.log" 2>&1 &
		BROKER_PID=$!
		PORT=$NATS_PORT ;;
	esac
	wait_port "$PORT"
}

stop_broker() {
	if [ -n "${BROKER_PID:-}" ]; then
		kill "$BROKER_PID" 2>/dev/null || true
		wait "$BROKER_PID" 2>/dev/null || true
		BROKER_PID=""
	fi
}

# --- the suite -----------------------------------------------------------------
# name|bench arguments. Every run uses MQTT 3.1.1 (nats-server 2.9 speaks only
# 3.1.1), 64-byte payloads, and --broker-pid for CPU and memory.
SUITE=(
	"p2p-q0|p2p -q 0 --duration $DUR"
	"p2p-q1|p2p -q 1 --duration $DUR"
	"rate10k-q0|rate -q 0 --rate 10000 --duration $DUR"
	"rate10k-q1|rate -q 1 --rate 10000 --duration $DUR"
	"fanin10-q1|fanin -q 1 --pubs 10 --duration $DUR"
	"manytopics100-q1|manytopics -q 1 --topics 100 --pubs 10 --duration $DUR"
	"fanout1000-q0|fanout -q 0 --subs 1000 --rate 100 --duration 10s"
	"connections2000|connections --conns 2000 --connect-rate 1000 --hold 3s"
)
BROKERS=(sextant mosquitto nats)

{
	echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
	echo "host: $(uname -srm), $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
	echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
	echo "sextant: $("$SX" version) ($(cd "$ROOT" && git rev-parse --short HEAD 2>/dev/null || echo unknown))"
	echo "mosquitto: $("$MOSQUITTO" -h 2>/dev/null | head -1)"
	echo "nats-server: $("$NATS" --version)"
	echo "go: $(go version)"
	echo "reps: $REPS, duration: $DUR"
} >"$OUT/env.txt"
cat "$OUT/env.txt" >&2

for rep in $(seq 1 "$REPS"); do
	# Rotate the broker order every repetition, so no broker always runs
	# first (or last) on a machine whose load drifts. Each scenario gets a
	# freshly started broker, so memory figures start from a clean process.
	n=${#BROKERS[@]}
	for i in $(seq 0 $((n - 1))); do
		b=${BROKERS[$(((i + rep - 1) % n))]}
		log "rep $rep: $b (load $(cut -d' ' -f1-3 /proc/loadavg))"
		echo "rep $rep $b start load: $(cut -d' ' -f1-3 /proc/loadavg)" >>"$OUT/load.txt"
		for entry in "${SUITE[@]}"; do
			name=${entry%%|*}
			args=${entry#*|}
			if [ -n "$ONLY" ] && [[ ",$ONLY," != *",$name,"* ]]; then continue; fi
			start_broker "$b" "$rep.$name"
			f="$OUT/raw/${b}__${name}__${rep}.json"
			# shellcheck disable=SC2086 # args is a word list on purpose
			if "$SX" bench $args -h 127.0.0.1 -p "$PORT" -V 311 --size 64 \
				--broker-pid "$BROKER_PID" --json --quiet >"$f" 2>"$OUT/logs/${b}__${name}__${rep}.err"; then
				log "  $name: done"
			else
				log "  $name: FAILED ($(head -c 300 "$OUT/logs/${b}__${name}__${rep}.err"))"
				rm -f "$f"
			fi
			stop_broker
		done
	done
done
echo "end load: $(cut -d' ' -f1-3 /proc/loadavg)" >>"$OUT/load.txt"

(cd "$ROOT" && go run ./scripts/benchtable "$OUT/raw" "${BROKERS[@]}") >"$OUT/table.md"
cat "$OUT/env.txt" "$OUT/load.txt" "$OUT/table.md"
log "results in $OUT"
