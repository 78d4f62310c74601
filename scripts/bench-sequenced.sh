#!/usr/bin/env bash
# bench-sequenced.sh: what sequencing a topic costs. Starts a cluster of
# real `sextant serve` processes on 127.0.0.1..N (default 5, so that
# replicas 5 has its voters), sets one policy rule per mode:
#
#   sxbench/r1/#  sequenced, replicas 1
#   sxbench/r3/#  sequenced, replicas 3
#   sxbench/r5/#  sequenced, replicas 5
#   anything else direct (the default rule)
#
# and runs the same `sextant bench` scenarios for each mode, each mode of
# each repetition on a fresh cluster (so that no mode runs beside the idle
# groups of another), the publisher on node 1 and the subscriber on node 2 (every
# message crosses a node-to-node link in every mode; a sequenced topic's
# home is its first publisher's node, node 1). Modes rotate every
# repetition. Each run gets fresh topics (a new placement group). It prints
# medians with the ratios mode/direct.
#
# Scenarios: rate1k-q1 (`rate -q 1 --rate 1000`: publish->deliver latency at
# a fixed load), p2p-q1 (`p2p -q 1`: closed-loop QoS 1 throughput,
# acknowledged and delivered, with the generator's default window of 100
# unacknowledged publishes), p2p-q1-w1000 (the same with a window of 1,000:
# a sequenced publish is acknowledged on commit, so throughput is window /
# commit time), p2p-q0 (closed-loop QoS 0: what is dropped under overload,
# and where: the nodes' drop counters are printed at the end).
#
# With -x, it then runs scripts/seqcluster on a fresh three-node cluster for
# each of the measurements listed: failover (20 kill -9 of a replicas-3
# group's home), idle10 (CPU and memory of idle groups: 1,000 topics with
# replicas 3 sharing 10 groups through the rule's group template), idle
# (100 groups of one topic: the cost per group at scale), replay
# (sx-from=earliest over 200,000 records).
#
# With -b BIN, every mode also runs as MODE-b with the sextant binary BIN (for example the main
# branch's, built into /tmp), in the same rotation: a before/after comparison in one run, each
# against its own direct (direct-b) and against the other build.
#
# Usage: scripts/bench-sequenced.sh [-r REPS] [-d DURATION] [-n NODES] [-o OUTDIR] [-m MODES] [-s SCENARIOS] [-b BIN] [-x failover,idle,idle10,replay]
#   MODES and SCENARIOS are comma lists (default direct,r1,r3,r5 and every scenario); -m none skips the
#   bench runs.
# Environment: SEXTANT_ARGS, extra flags for every node (for example --fsync never).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
REPS=3
DUR=5s
NODES=5
OUT=
MODES=direct,r1,r3,r5
ONLY=
EXTRA=
BIN_B=
while getopts "r:d:n:o:m:s:x:b:" opt; do
	case $opt in
	r) REPS=$OPTARG ;;
	d) DUR=$OPTARG ;;
	n) NODES=$OPTARG ;;
	o) OUT=$OPTARG ;;
	m) MODES=$OPTARG ;;
	s) ONLY=$OPTARG ;;
	x) EXTRA=$OPTARG ;;
	b) BIN_B=$(realpath "$OPTARG") ;;
	*) echo "usage: $0 [-r REPS] [-d DURATION] [-n NODES] [-o OUTDIR] [-m MODES] [-s SCENARIOS] [-b BIN] [-x failover,idle,idle10,replay]" >&2; exit 2 ;;
	esac
done
case ",$MODES," in *,r5,*) if [ "$NODES" -lt 5 ]; then echo "bench-sequenced: r5 needs 5 nodes (-n 5)" >&2; exit 2; fi ;; esac
OUT=${OUT:-$(mktemp -d "${TMPDIR:-/tmp}/sextant-bench-seq.XXXXXX")}
mkdir -p "$OUT/raw" "$OUT/logs"
SX="$OUT/sextant"
(cd "$ROOT" && go build -o "$SX" ./cmd/sextant)
log() { echo "bench-sequenced: $*" >&2; }

MQTT=24883
CLUSTER=24946
SUITE=(
	"rate1k-q1|rate -q 1 --rate 1000 --duration $DUR"
	"p2p-q1|p2p -q 1 --duration $DUR"
	"p2p-q1-w1000|p2p -q 1 --inflight 1000 --duration $DUR"
	"p2p-q0|p2p -q 0 --duration $DUR"
)
if [ -n "$ONLY" ]; then
	keep=()
	for entry in "${SUITE[@]}"; do
		case ",$ONLY," in *",${entry%%|*},"*) keep+=("$entry") ;; esac
	done
	SUITE=("${keep[@]}")
fi
IFS=, read -r -a MODE_LIST <<<"$MODES"
if [ -n "$BIN_B" ] && [ "$MODES" != none ]; then
	for mode in "${MODE_LIST[@]}"; do MODE_LIST+=("$mode-b"); done
fi

PIDS=()
# shellcheck disable=SC2086 # SEXTANT_ARGS is a word list on purpose
start_node() { # n
	local n=$1 ip=127.0.0.$1 join=
	if [ "$n" != 1 ]; then join=127.0.0.1:$CLUSTER; fi
	mkdir -p "$OUT/data/n$n"
	"$BIN" serve --node-id "n$n" --data-dir "$OUT/data/n$n" --log-level warn \
		--cluster-addr "$ip:$CLUSTER" ${join:+--join "$join"} \
		--mqtt-addr "$ip:$MQTT" --ws-addr "" --admin-addr "$ip:$((MQTT + 1))" \
		${SEXTANT_ARGS:-} >>"$OUT/logs/n$n.log" 2>&1 &
	PIDS[n]=$!
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
wait_members() { # n
	for _ in $(seq 1 600); do
		if "$SX" nodes --admin "127.0.0.1:$((MQTT + 1))" --json 2>/dev/null | grep -c '"state": "alive"' | grep -qx "$1"; then return 0; fi
		sleep 0.1
	done
	log "cluster did not form"; return 1
}

{
	echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
	echo "sextant: $("$SX" version) ($(cd "$ROOT" && git rev-parse --short HEAD 2>/dev/null || echo unknown))"
	if [ -n "$BIN_B" ]; then echo "sextant -b (modes *-b): $BIN_B"; fi
	echo "nodes: $NODES, reps: $REPS, duration: $DUR, modes: $MODES, node flags: ${SEXTANT_ARGS:-(defaults)}"
	echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
} >"$OUT/env.txt"
cat "$OUT/env.txt" >&2

cat >"$OUT/policy.yaml" <<'YAML'
rules:
  - match: "sxbench/r1/#"
    mode: sequenced
    replicas: 1
  - match: "sxbench/r3/#"
    mode: sequenced
    replicas: 3
  - match: "sxbench/r5/#"
    mode: sequenced
    replicas: 5
YAML
# start_cluster: a fresh cluster (empty data directories) with the rules,
# so that no mode runs beside the idle groups of another.
start_cluster() {
	rm -rf "$OUT/data"
	for n in $(seq 1 "$NODES"); do
		start_node "$n"
		if [ "$n" = 1 ]; then wait_members 1; fi
	done
	wait_members "$NODES"
	"$SX" policy set --admin "127.0.0.1:$((MQTT + 1))" -f "$OUT/policy.yaml" >/dev/null
	sleep 1 # every node's metadata copy has the rules
}
# save_drops MODE REP: where messages were dropped, per node (nonzero
# counters only): the access node's sequenced drops, the links', the
# feeds' and the sessions' (QoS 0 overload).
save_drops() {
	for n in $(seq 1 "$NODES"); do
		curl -s "http://127.0.0.$n:$((MQTT + 1))/metrics" |
			grep -E '^sextant_(sequenced_dropped_total|peer_dropped_messages_total|delivery_[a-z_]*(dropped|lost)[a-z_]*|messages_dropped[a-z_]*)' |
			grep -v ' 0$' | sed "s/^/$1 rep $2 n$n /" >>"$OUT/drops.txt" || true
	done
}

if [ "$MODES" != none ]; then
for rep in $(seq 1 "$REPS"); do
	# Rotate the modes so that none always runs first or last.
	k=$(((rep - 1) % ${#MODE_LIST[@]}))
	order=("${MODE_LIST[@]:k}" "${MODE_LIST[@]:0:k}")
	for mode in "${order[@]}"; do
		log "rep $rep: $mode (load $(cut -d' ' -f1-3 /proc/loadavg))"
		BIN=$SX
		rule=$mode
		if [ "${mode%-b}" != "$mode" ]; then BIN=$BIN_B rule=${mode%-b}; fi
		start_cluster
		for entry in "${SUITE[@]}"; do
			name=${entry%%|*}
			args=${entry#*|}
			f="$OUT/raw/${mode}__${name}__${rep}.json"
			seq=()
			if [ "$rule" != direct ]; then seq=(--sequenced); fi
			before=$(node_ticks)
			# shellcheck disable=SC2086 # args is a word list on purpose
			if "$SX" bench $args -h 127.0.0.1 -p "$MQTT" --sub-url "mqtt://127.0.0.2:$MQTT" \
				--topic-prefix "sxbench/$rule/$rep-$name" "${seq[@]}" -V 5 --size 64 --json --quiet \
				>"$f" 2>"$OUT/logs/${mode}__${name}__${rep}.err"; then
				got=$(grep -o '"received": [0-9]*' "$f" | head -1 | grep -o '[0-9]*$')
				log "  $name: done ($got delivered)"
				echo "$mode $name $(($(node_ticks) - before)) $got" >>"$OUT/cpu.txt"
			else
				log "  $name: FAILED ($(head -c 300 "$OUT/logs/${mode}__${name}__${rep}.err"))"
				rm -f "$f"
			fi
		done
		save_drops "$mode" "$rep"
		stop_nodes
	done
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)" >>"$OUT/env.txt"
: >"$OUT/table.md"
for mode in "${MODE_LIST[@]}"; do
	if [ "$mode" = direct ]; then continue; fi
	base=direct
	if [ "${mode%-b}" != "$mode" ]; then base=direct-b; fi
	if [ "$mode" = direct-b ]; then base=direct; fi
	{
		echo
		echo "### $mode against $base"
		echo
		(cd "$ROOT" && go run ./scripts/benchtable "$OUT/raw" "$mode" "$base")
	} >>"$OUT/table.md"
	if [ "${mode%-b}" != "$mode" ] && [ "$mode" != direct-b ]; then
		{
			echo
			echo "### ${mode%-b} against $mode (this build against -b)"
			echo
			(cd "$ROOT" && go run ./scripts/benchtable "$OUT/raw" "${mode%-b}" "$mode")
		} >>"$OUT/table.md"
	fi
done
if [ -s "$OUT/cpu.txt" ]; then
	hz=$(getconf CLK_TCK)
	{
		echo
		echo "| scenario | mode | all nodes' CPU µs/msg (median) | runs |"
		echo "|---|---|---:|---:|"
		sort -k2,2 -k1,1 "$OUT/cpu.txt" | awk -v hz="$hz" '
			function flush() { if (n) { m = (n % 2) ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2; printf "| %s | %s | %.2f | %d |\n", sc, st, m, n } }
			{ k = $2 " " $1; if (k != key) { flush(); key = k; sc = $2; st = $1; n = 0 }
			  if ($4 > 0) { n++; v[n] = $3 / hz * 1e6 / $4; for (i = n; i > 1 && v[i] < v[i - 1]; i--) { t = v[i]; v[i] = v[i - 1]; v[i - 1] = t } } }
			END { flush() }'
	} >>"$OUT/table.md"
fi
cat "$OUT/env.txt" "$OUT/table.md"
if [ -s "$OUT/drops.txt" ]; then echo; echo "drop counters, nonzero (mode, repetition, node):"; cat "$OUT/drops.txt"; fi
fi

# The measurements on a cluster of their own (scripts/seqcluster).
IFS=, read -r -a EXTRAS <<<"$EXTRA"
for x in "${EXTRAS[@]}"; do
	log "$x (load $(cut -d' ' -f1-3 /proc/loadavg))"
	case $x in
	failover) args=(-mode failover -kills 20) ;;
	idle) args=(-mode idle -topics 100 -groups 100 -window 30s) ;;
	idle10) args=(-mode idle -topics 1000 -groups 10 -window 30s) ;;
	replay) args=(-mode replay -records 200000) ;;
	*) log "unknown measurement $x"; continue ;;
	esac
	(cd "$ROOT" && go run ./scripts/seqcluster -sextant "$SX" "${args[@]}" -out "$OUT/$x") | tee "$OUT/$x.txt"
done
log "results in $OUT"
