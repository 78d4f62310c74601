#!/usr/bin/env bash
# partial-partition.sh: what a partial partition costs a QoS 1 stream, as a
# new user would see it. Three `sextant serve` processes, each in its own
# network namespace, joined by veth pairs to a bridge that lives in a
# namespace of its own (no packet reaches a real network; iptables on
# 127.0.0.x would not cut anything, since loopback connections leave from
# 127.0.0.1). A persistent QoS 1 subscriber (mosquitto_sub -c) on n1, and
# mosquitto_pub -l at QoS 1 on n2 sending MESSAGES numbered lines at about
# RATE per second; CUT_AFTER seconds in, iptables in n1's namespace cuts n1
# from n2 (both ways) for CUT seconds, while n3 reaches both. It prints one
# line of results:
#
#   published 1500 acknowledged 1500 received 1500 distinct 1500 duplicates 0 reordered 0 during-cut 1380
#
# (during-cut: messages that reached the subscriber while n1 and n2 were
# cut apart, which only n3 can have carried.)
#
# Needs root (namespaces, iptables), iproute2, iptables and mosquitto-clients.
#
#   scripts/partial-partition.sh                  # builds ./cmd/sextant
#   SEXTANT=/path/to/sextant scripts/partial-partition.sh
#
# Environment: SEXTANT, MESSAGES (1500), RATE (200), CUT (8), CUT_AFTER (1), LOG_LEVEL (info),
# OUT (a temporary directory: logs, received messages), KEEP=1 keeps OUT.
set -euo pipefail
cd "$(dirname "$0")/.."

MESSAGES=${MESSAGES:-1500}
RATE=${RATE:-200}
CUT=${CUT:-8}
CUT_AFTER=${CUT_AFTER:-1}
OUT=${OUT:-$(mktemp -d "${TMPDIR:-/tmp}/sextant-partition.XXXXXX")}
if [ -z "${SEXTANT:-}" ]; then
	SEXTANT=$OUT/sextant
	go build -o "$SEXTANT" ./cmd/sextant
fi
log() { echo "partial-partition: $*" >&2; }

# Names unique to this run: several runs may share a machine.
ID=sxp$$
BR=${ID}br
NET=10.213.0
declare -a PIDS=()
cleanup() {
	for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
	for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
	# Anything still running in this run's namespaces is this run's.
	for i in 1 2 3; do
		for p in $(ip netns pids "${ID}n$i" 2>/dev/null); do kill "$p" 2>/dev/null || true; done
	done
	for i in 1 2 3; do ip netns del "${ID}n$i" 2>/dev/null || true; done
	ip netns del "$BR" 2>/dev/null || true
	if [ "${KEEP:-}" != 1 ]; then rm -rf "$OUT"; else log "output kept in $OUT"; fi
}
trap cleanup EXIT

ip netns add "$BR"
ip -n "$BR" link add br0 type bridge
ip -n "$BR" link set br0 up
for i in 1 2 3; do
	ns=${ID}n$i
	ip netns add "$ns"
	ip link add "${ID}e$i" netns "$ns" type veth peer name "p$i" netns "$BR"
	ip -n "$BR" link set "p$i" master br0
	ip -n "$BR" link set "p$i" up
	ip -n "$ns" addr add "$NET.$i/24" dev "${ID}e$i"
	ip -n "$ns" link set "${ID}e$i" up
	ip -n "$ns" link set lo up
done
in_ns() { local i=$1; shift; ip netns exec "${ID}n$i" "$@"; }
# bg_ns runs a command in node I's namespace in the background; $! is its
# process (ip netns exec execs it), so that cleanup can stop it.
bg_ns() { local i=$1; shift; exec ip netns exec "${ID}n$i" "$@"; }

start() { # start I [JOIN]
	local i=$1 join=${2:-}
	mkdir -p "$OUT/n$i"
	# Clients reach the node on its bridge address, anonymously (the
	# namespaces are this run's alone); the admin API stays on the
	# namespace's own loopback.
	(bg_ns "$i" "$SEXTANT" serve --node-id "n$i" --data-dir "$OUT/n$i" --log-level "${LOG_LEVEL:-info}" \
		--cluster-addr "$NET.$i:7946" ${join:+--join "$join"} --allow-anonymous true \
		--mqtt-addr "$NET.$i:1883" --ws-addr "" --admin-addr 127.0.0.1:8088 \
		>"$OUT/n$i.log" 2>&1) &
	PIDS+=($!)
}
start 1
start 2 "$NET.1:7946"
start 3 "$NET.1:7946"
for _ in $(seq 1 300); do
	alive=$(in_ns 1 "$SEXTANT" nodes --admin 127.0.0.1:8088 --json 2>/dev/null | grep -c '"state": "alive"' || true)
	[ "$alive" = 3 ] && break
	for p in "${PIDS[@]}"; do kill -0 "$p" 2>/dev/null || { log "a node exited:"; tail -3 "$OUT"/n*.log >&2; exit 1; }; done
	sleep 0.2
done
[ "$alive" = 3 ] || { log "the cluster did not form"; exit 1; }

(bg_ns 1 mosquitto_sub -h "$NET.1" -p 1883 -q 1 -c -i pp-sub -t 'pp/#' -F '%U %p' >"$OUT/received.txt" 2>"$OUT/sub.log") &
PIDS+=($!)
# The subscription's interest reaches n2 a round trip after its SUBACK:
# probe until one arrives.
for _ in $(seq 1 100); do
	in_ns 2 mosquitto_pub -h "$NET.2" -p 1883 -q 1 -t pp/probe -m probe
	grep -q probe "$OUT/received.txt" && break
	sleep 0.2
done
grep -q probe "$OUT/received.txt" || { log "n1's subscriber never got n2's probe"; exit 1; }

# The publisher: numbered lines at RATE per second (a bash builtin wait,
# no process per line), through mosquitto_pub -l at QoS 1; -d logs every
# PUBACK.
exec {never}<> <(:)
pace=$(awk -v r="$RATE" 'BEGIN { printf "%.4f", 1 / r }')
(
	for n in $(seq 1 "$MESSAGES"); do
		echo "m$n"
		if [ $((n % 100)) = 0 ]; then echo "m$n $(date +%s.%N)" >>"$OUT/fed.txt"; fi
		read -r -t "$pace" -u "$never" || true
	done
) | (bg_ns 2 mosquitto_pub -h "$NET.2" -p 1883 -q 1 -i pp-pub -t pp/load -l -d >"$OUT/pub.log" 2>&1) &
pub=$!
PIDS+=($pub)
sleep "$CUT_AFTER"
log "cutting n1 from n2 for ${CUT}s"
in_ns 1 iptables -I INPUT -s "$NET.2" -j DROP
in_ns 1 iptables -I OUTPUT -d "$NET.2" -j DROP
cut_from=$(date +%s.%N)
sleep "$CUT"
cut_to=$(date +%s.%N)
in_ns 1 iptables -D INPUT -s "$NET.2" -j DROP
in_ns 1 iptables -D OUTPUT -d "$NET.2" -j DROP
log "healed"
wait "$pub" || log "mosquitto_pub exited with $?"

# Wait for the stream to arrive: until everything is there, or nothing
# more arrives for 20 s.
count() { grep -c ' m[0-9]*$' "$OUT/received.txt" || true; }
last=-1
still=0
while :; do
	n=$(count)
	[ "$n" -ge "$MESSAGES" ] && break
	if [ "$n" = "$last" ]; then still=$((still + 1)); else still=0; fi
	[ "$still" -ge 100 ] && break
	last=$n
	sleep 0.2
done
sleep 1 # late duplicates
acked=$(grep -c 'received PUBACK' "$OUT/pub.log" || true)
grep ' m[0-9]*$' "$OUT/received.txt" | awk -v published="$MESSAGES" -v acked="$acked" -v from="$cut_from" -v to="$cut_to" '
	{ n = substr($2, 2) + 0; total++; if ($1 + 0 > from + 0 && $1 + 0 < to + 0) during++
	  if (seen[n]++) dup++; else { distinct++; if (n < last) re++; last = n } }
	END { printf "published %d acknowledged %d received %d distinct %d duplicates %d reordered %d during-cut %d\n",
		published, acked, total, distinct, dup + 0, re + 0, during + 0 }'
