#!/usr/bin/env bash
# bench-cluster.sh: what crossing a node costs. Runs the same `sextant bench`
# scenarios with publisher and subscriber on one node, and with the publisher
# on one node of a two-node cluster and the subscriber on the other (every
# message crosses one node-to-node link), alternating the two setups between
# repetitions, and prints medians with the ratios two-node/one-node.
#
# With -c BASE (another sextant binary, for example one built from main),
# it compares two builds across the link instead: both setups are two-node
# clusters, "two-nodes" with this tree's binary and "base" with BASE,
# alternated the same way, and the ratios are this tree's over BASE's.
#
# Usage: scripts/bench-cluster.sh [-r REPS] [-d DURATION] [-o OUTDIR] [-c BASE] [-s SCENARIO,...]
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
REPS=3
DUR=5s
OUT=
BASE=
ONLY=
while getopts "r:d:o:c:s:" opt; do
	case $opt in
	r) REPS=$OPTARG ;;
	d) DUR=$OPTARG ;;
	o) OUT=$OPTARG ;;
	c) BASE=$OPTARG ;;
	s) ONLY=$OPTARG ;;
	*) echo "usage: $0 [-r REPS] [-d DURATION] [-o OUTDIR] [-c BASE] [-s SCENARIO,...]" >&2; exit 2 ;;
	esac
done
OUT=${OUT:-$(mktemp -d "${TMPDIR:-/tmp}/sextant-bench-cluster.XXXXXX")}
mkdir -p "$OUT/raw" "$OUT/logs"
SX="$OUT/sextant"
(cd "$ROOT" && go build -o "$SX" ./cmd/sextant)
log() { echo "bench-cluster: $*" >&2; }

MQTT=22883
CLUSTER=22946
SUITE=(
	"p2p-q0|p2p -q 0 --duration $DUR"
	"p2p-q1|p2p -q 1 --duration $DUR"
	"rate10k-q0|rate -q 0 --rate 10000 --duration $DUR"
	"rate10k-q1|rate -q 1 --rate 10000 --duration $DUR"
)

if [ -n "$ONLY" ]; then
	keep=()
	for entry in "${SUITE[@]}"; do
		case ",$ONLY," in *",${entry%%|*},"*) keep+=("$entry") ;; esac
	done
	SUITE=("${keep[@]}")
fi

PIDS=()
BIN=$SX
start_node() { # id ip [join]
	local id=$1 ip=$2 join=${3:-}
	rm -rf "$OUT/data/$id"
	mkdir -p "$OUT/data/$id"
	"$BIN" serve --node-id "$id" --data-dir "$OUT/data/$id" --log-level warn \
		--cluster-addr "$ip:$CLUSTER" ${join:+--join "$join"} \
		--mqtt-addr "$ip:$MQTT" --ws-addr "" --admin-addr "$ip:$((MQTT + 1))" \
		>>"$OUT/logs/$id.log" 2>&1 &
	PIDS+=($!)
}
stop_nodes() {
	for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
	for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
	PIDS=()
}
trap stop_nodes EXIT
node_ticks() { # user+system clock ticks of the running nodes
	local sum=0 p f
	for p in "${PIDS[@]}"; do
		if f=$(cut -d' ' -f14,15 "/proc/$p/stat" 2>/dev/null); then sum=$((sum + ${f% *} + ${f#* })); fi
	done
	echo "$sum"
}
wait_members() { # ip n
	for _ in $(seq 1 300); do
		if "$SX" nodes --admin "$1:$((MQTT + 1))" --json 2>/dev/null | grep -c '"state": "alive"' | grep -qx "$2"; then return 0; fi
		sleep 0.1
	done
	log "cluster did not form"; return 1
}

{
	echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
	echo "sextant: $("$SX" version) ($(cd "$ROOT" && git rev-parse --short HEAD 2>/dev/null || echo unknown))"
	if [ -n "$BASE" ]; then echo "base: $("$BASE" version) ($BASE)"; fi
	echo "reps: $REPS, duration: $DUR, load before: $(cut -d' ' -f1-3 /proc/loadavg)"
} >"$OUT/env.txt"
cat "$OUT/env.txt" >&2

other=one-node
if [ -n "$BASE" ]; then other=base; fi
for rep in $(seq 1 "$REPS"); do
	setups=("$other" two-nodes)
	if [ $((rep % 2)) = 0 ]; then setups=(two-nodes "$other"); fi
	for setup in "${setups[@]}"; do
		log "rep $rep: $setup (load $(cut -d' ' -f1-3 /proc/loadavg))"
		BIN=$SX
		if [ "$setup" = base ]; then BIN=$BASE; fi
		for entry in "${SUITE[@]}"; do
			name=${entry%%|*}
			args=${entry#*|}
			start_node c1 127.0.0.1
			sub=()
			if [ "$setup" != one-node ]; then
				start_node c2 127.0.0.2 "127.0.0.1:$CLUSTER"
				wait_members 127.0.0.1 2
				sub=(--sub-url "mqtt://127.0.0.2:$MQTT")
			else
				wait_members 127.0.0.1 1
			fi
			f="$OUT/raw/${setup}__${name}__${rep}.json"
			before=$(node_ticks)
			# shellcheck disable=SC2086 # args is a word list on purpose
			if "$SX" bench $args -h 127.0.0.1 -p "$MQTT" "${sub[@]}" -V 5 --size 64 --json --quiet \
				>"$f" 2>"$OUT/logs/${setup}__${name}__${rep}.err"; then
				log "  $name: done"
				# Both brokers' CPU (user+system, clock ticks) per delivered message.
				got=$(grep -o '"received": [0-9]*' "$f" | head -1 | grep -o '[0-9]*$')
				echo "$setup $name $(( $(node_ticks) - before )) $got" >>"$OUT/cpu.txt"
			else
				log "  $name: FAILED ($(head -c 300 "$OUT/logs/${setup}__${name}__${rep}.err"))"
				rm -f "$f"
			fi
			stop_nodes
		done
	done
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)" >>"$OUT/env.txt"
(cd "$ROOT" && go run ./scripts/benchtable "$OUT/raw" two-nodes "$other") >"$OUT/table.md"
# Broker CPU per delivered message, both nodes together, medians.
if [ -s "$OUT/cpu.txt" ]; then
	hz=$(getconf CLK_TCK)
	{
		echo
		echo "| scenario | setup | brokers' CPU µs/msg (median) | runs |"
		echo "|---|---|---:|---:|"
		sort -k2,2 -k1,1 "$OUT/cpu.txt" | awk -v hz="$hz" '
			function flush() { if (n) { m = (n % 2) ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2; printf "| %s | %s | %.2f | %d |\n", sc, st, m, n } }
			{ k = $2 " " $1; if (k != key) { flush(); key = k; sc = $2; st = $1; n = 0 }
			  if ($4 > 0) { n++; v[n] = $3 / hz * 1e6 / $4; for (i = n; i > 1 && v[i] < v[i - 1]; i--) { t = v[i]; v[i] = v[i - 1]; v[i - 1] = t } } }
			END { flush() }'
	} >>"$OUT/table.md"
fi
cat "$OUT/env.txt" "$OUT/table.md"
log "results in $OUT"
