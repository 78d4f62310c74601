package bench

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

// ProcSample is one reading of a process's CPU time and memory.
type ProcSample struct {
	CPU    time.Duration // user + system
	RSSKiB int64         // resident set size (VmRSS)
}

// ReadProc reads pid's CPU time and RSS from /proc. pid 0 means this
// process.
func ReadProc(pid int) (ProcSample, error) {
	dir := "/proc/self"
	if pid != 0 {
		dir = "/proc/" + strconv.Itoa(pid)
	}
	stat, err := os.ReadFile(dir + "/stat")
	if err != nil {
		return ProcSample{}, fmt.Errorf("bench: reading process stats: %w", err)
	}
	cpu, err := ParseStatCPU(stat)
	if err != nil {
		return ProcSample{}, err
	}
	status, err := os.ReadFile(dir + "/status")
	if err != nil {
		return ProcSample{}, fmt.Errorf("bench: reading process status: %w", err)
	}
	rss, err := ParseStatusRSS(status)
	if err != nil {
		return ProcSample{}, err
	}
	return ProcSample{CPU: cpu, RSSKiB: rss}, nil
}

var errProcFormat = errors.New("bench: unexpected /proc format")

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
		return SystemCPU{}, fmt.Errorf("bench: reading /proc/stat: %w", err)
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
