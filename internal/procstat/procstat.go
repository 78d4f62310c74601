package procstat

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"time"
)

// clockTicks is USER_HZ, the unit of utime and stime in /proc/PID/stat. It
// is 100 on every Linux architecture Go supports (the kernel's ABI fixes it,
// whatever HZ the kernel runs at).
const clockTicks = 100

// Sample is one reading of a process's CPU time and memory.
type Sample struct {
	CPU    time.Duration // user + system
	RSSKiB int64         // resident set size (VmRSS)
}

// Read reads pid's CPU time and RSS from /proc. pid 0 means this
// process.
func Read(pid int) (Sample, error) {
	dir := "/proc/self"
	if pid != 0 {
		dir = "/proc/" + strconv.Itoa(pid)
	}
	stat, err := os.ReadFile(dir + "/stat")
	if err != nil {
		return Sample{}, fmt.Errorf("procstat: reading process stats: %w", err)
	}
	cpu, err := ParseStatCPU(stat)
	if err != nil {
		return Sample{}, err
	}
	status, err := os.ReadFile(dir + "/status")
	if err != nil {
		return Sample{}, fmt.Errorf("procstat: reading process status: %w", err)
	}
	rss, err := ParseStatusRSS(status)
	if err != nil {
		return Sample{}, err
	}
	return Sample{CPU: cpu, RSSKiB: rss}, nil
}

var errProcFormat = errors.New("procstat: unexpected /proc format")

// maxTicks is the most CPU time a time.Duration can hold, in ticks (about
// 290 years).
const maxTicks = int64(1<<63-1) / int64(time.Second/clockTicks)

// ParseStatCPU returns utime+stime from the contents of /proc/PID/stat.
func ParseStatCPU(stat []byte) (time.Duration, error) {
	// The command name (field 2) is in parentheses and may hold spaces
	// and parentheses: fields resume after the last ')'.
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, errProcFormat
	}
	f := bytes.Fields(stat[i+1:])
	// f[0] is field 3 (state); utime and stime are fields 14 and 15.
	if len(f) < 13 {
		return 0, errProcFormat
	}
	ut, err1 := strconv.ParseInt(string(f[11]), 10, 64)
	st, err2 := strconv.ParseInt(string(f[12]), 10, 64)
	if err1 != nil || err2 != nil || ut < 0 || st < 0 || ut+st > maxTicks {
		return 0, errProcFormat
	}
	return time.Duration(ut+st) * (time.Second / clockTicks), nil
}

// ParseStatusRSS returns VmRSS in KiB from the contents of
// /proc/PID/status.
func ParseStatusRSS(status []byte) (int64, error) {
	for line := range bytes.SplitSeq(status, []byte{'\n'}) {
		rest, ok := bytes.CutPrefix(line, []byte("VmRSS:"))
		if !ok {
			continue
		}
		f := bytes.Fields(rest)
		if len(f) < 1 {
			return 0, errProcFormat
		}
		n, err := strconv.ParseInt(string(f[0]), 10, 64)
		if err != nil || n < 0 {
			return 0, errProcFormat
		}
		return n, nil
	}
	return 0, errProcFormat
}

// SystemCPU is the machine-wide CPU time from /proc/stat, summed over
// cores, in seconds: Busy is everything but idle and iowait.
type SystemCPU struct {
	Busy, Total float64
}

// ReadSystemCPU reads /proc/stat.
func ReadSystemCPU() (SystemCPU, error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return SystemCPU{}, fmt.Errorf("procstat: reading /proc/stat: %w", err)
	}
	return ParseSystemCPU(b)
}

// ParseSystemCPU parses the aggregate "cpu" line of /proc/stat.
func ParseSystemCPU(stat []byte) (SystemCPU, error) {
	for line := range bytes.SplitSeq(stat, []byte{'\n'}) {
		rest, ok := bytes.CutPrefix(line, []byte("cpu "))
		if !ok {
			continue
		}
		f := bytes.Fields(rest)
		if len(f) < 4 {
			return SystemCPU{}, errProcFormat
		}
		var total, idle float64
		for i, x := range f {
			n, err := strconv.ParseUint(string(x), 10, 64)
			if err != nil {
				return SystemCPU{}, errProcFormat
			}
			if i >= 8 {
				break // guest time is already counted in user time
			}
			total += float64(n)
			if i == 3 || i == 4 { // idle, iowait
				idle += float64(n)
			}
		}
		return SystemCPU{Busy: (total - idle) / clockTicks, Total: total / clockTicks}, nil
	}
	return SystemCPU{}, errProcFormat
}

// MemoryLimit is the memory the process may use, in bytes: its cgroup's
// limit (cgroup v2 memory.max) when one is set, else the machine's memory
// (MemTotal of /proc/meminfo).
func MemoryLimit() (int64, error) {
	if b, err := os.ReadFile("/sys/fs/cgroup/memory.max"); err == nil {
		if n, ok, err := ParseCgroupMax(b); err == nil && ok {
			return n, nil
		}
	}
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0, fmt.Errorf("procstat: reading /proc/meminfo: %w", err)
	}
	return ParseMemTotal(b)
}

// ParseCgroupMax parses a cgroup v2 memory.max file: a byte count, or
// "max" (no limit: ok is false).
func ParseCgroupMax(b []byte) (limit int64, ok bool, err error) {
	s := string(bytes.TrimSpace(b))
	if s == "max" {
		return 0, false, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n <= 0 {
		return 0, false, errProcFormat
	}
	return n, true, nil
}

// ParseMemTotal returns MemTotal in bytes from the contents of
// /proc/meminfo.
func ParseMemTotal(meminfo []byte) (int64, error) {
	for line := range bytes.SplitSeq(meminfo, []byte{'\n'}) {
		rest, ok := bytes.CutPrefix(line, []byte("MemTotal:"))
		if !ok {
			continue
		}
		f := bytes.Fields(rest)
		if len(f) != 2 || string(f[1]) != "kB" {
			return 0, errProcFormat
		}
		n, err := strconv.ParseInt(string(f[0]), 10, 64)
		if err != nil || n <= 0 || n > 1<<53 {
			return 0, errProcFormat
		}
		return n << 10, nil
	}
	return 0, errProcFormat
}
