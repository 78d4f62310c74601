// Package emu is Sextant's geo emulator for placement: it loads real latency
// datasets embedded in the binary (data/, see data/ATTRIBUTION.md), embeds
// them into Vivaldi coordinates with serf's coordinate package over
// simulated gossip, generates the ePulsar evaluation workloads (MMOG over US
// cities, UAV swarms over MEC zones, monitoring cost), applies placement
// policies from internal/placement to them, scores each choice against the
// true latencies, and writes tables and SVG charts.
//
// Only cmd/sextant's emulate command imports it; production code never does.
//
// Concurrency: Run fans permutations out to worker goroutines it owns and
// waits for them; everything else is plain functions over values. Results
// depend only on the seed and the parameters, never on the number of workers.
// Randomness is always seeded; there is no package state.
package emu
