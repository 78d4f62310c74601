// Package procstat owns reading a process's and the machine's resource
// figures from Linux's /proc (and the cgroup file system): a process's CPU
// time and resident memory, the machine's CPU time, and the memory the
// process may use. Each reader has a pure parser beside it (ParseStatCPU,
// ParseStatusRSS, ParseSystemCPU, ParseMemTotal, ParseCgroupMax), tested
// and fuzzed on its own.
//
// Who uses it: the benchmark (internal/bench) to measure a generator and a
// broker, and the monitoring agent (internal/monitor/agent) for a node's
// load reports. It imports only the standard library. Its functions hold
// no state and are safe for concurrent use.
package procstat
