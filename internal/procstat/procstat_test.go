package procstat

import (
	"testing"
	"time"
)

func TestParseProc(t *testing.T) {
	stat := []byte("1234 (my (odd) proc) S 1 1234 1234 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 3 0 100 1000 200\n")
	cpu, err := ParseStatCPU(stat)
	if err != nil || cpu != 3*time.Second {
		t.Fatalf("cpu %v, %v", cpu, err)
	}
	if _, err := ParseStatCPU([]byte("1234 (x) S 1 2")); err == nil {
		t.Fatal("short stat parsed")
	}
	status := []byte("Name:\tx\nVmPeak:\t  9000 kB\nVmRSS:\t  4321 kB\nThreads:\t3\n")
	rss, err := ParseStatusRSS(status)
	if err != nil || rss != 4321 {
		t.Fatalf("rss %d, %v", rss, err)
	}
	if _, err := ParseStatusRSS([]byte("Name:\tx\n")); err == nil {
		t.Fatal("status without VmRSS parsed")
	}
	if s, err := Read(0); err != nil || s.RSSKiB <= 0 {
		t.Fatalf("own /proc: %+v %v", s, err)
	}
}

func TestParseSystemCPU(t *testing.T) {
	stat := []byte("cpu  100 0 50 800 50 0 0 0 7 7\ncpu0 50 0 25 400 25 0 0 0 0 0\nintr 1\n")
	s, err := ParseSystemCPU(stat)
	if err != nil || s.Busy != 1.5 || s.Total != 10 {
		t.Fatalf("%+v %v", s, err)
	}
	if _, err := ParseSystemCPU([]byte("cpu0 1 2 3 4\n")); err == nil {
		t.Fatal("stat without the aggregate line parsed")
	}
	if s, err := ReadSystemCPU(); err != nil || s.Total <= 0 {
		t.Fatalf("own /proc/stat: %+v %v", s, err)
	}
}

// FuzzParseProc checks that the /proc parsers never panic and never return
// negative figures.
func FuzzParseProc(f *testing.F) {
	f.Add([]byte("1 (init) S 0 1 1 0 -1 4194560 1 2 3 4 5 6 7 8 20 0 1 0 9 10 11\n"))
	f.Add([]byte("Name:\tx\nVmRSS:\t  12 kB\n"))
	f.Add([]byte("9 ((a) b)) R 1 2 3 4 5 6 7 8 9 10 11 12"))
	f.Add([]byte("cpu  10 0 5 100 3 0 1 2 0 0\ncpu0 5 0 2 50 1 0 0 1 0 0\n"))
	f.Add([]byte("MemTotal:       24576000 kB\nMemFree:  1 kB\n"))
	f.Add([]byte("max\n"))
	f.Add([]byte("2147483648\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		if cpu, err := ParseStatCPU(b); err == nil && cpu < 0 {
			t.Fatalf("negative CPU %v", cpu)
		}
		if rss, err := ParseStatusRSS(b); err == nil && rss < 0 {
			t.Fatalf("negative RSS %d", rss)
		}
		if s, err := ParseSystemCPU(b); err == nil && (s.Busy < 0 || s.Busy > s.Total) {
			t.Fatalf("system CPU %+v", s)
		}
		if n, err := ParseMemTotal(b); err == nil && n <= 0 {
			t.Fatalf("memory %d", n)
		}
		if n, ok, err := ParseCgroupMax(b); err == nil && ok && n <= 0 {
			t.Fatalf("cgroup limit %d", n)
		}
	})
}

func TestMemoryLimit(t *testing.T) {
	n, err := ParseMemTotal([]byte("MemTotal:       24576000 kB\nMemFree:         1000 kB\n"))
	if err != nil || n != 24576000<<10 {
		t.Fatalf("MemTotal: %d, %v", n, err)
	}
	for _, bad := range []string{"MemFree: 1 kB\n", "MemTotal: 12\n", "MemTotal: -1 kB\n", "MemTotal: x kB\n"} {
		if _, err := ParseMemTotal([]byte(bad)); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
	if n, ok, err := ParseCgroupMax([]byte("2147483648\n")); err != nil || !ok || n != 2<<30 {
		t.Fatalf("memory.max: %d %v %v", n, ok, err)
	}
	if _, ok, err := ParseCgroupMax([]byte("max\n")); err != nil || ok {
		t.Fatalf("memory.max of max: %v %v", ok, err)
	}
	if _, _, err := ParseCgroupMax([]byte("0")); err == nil {
		t.Fatal("a zero limit parsed")
	}
	if n, err := MemoryLimit(); err != nil || n <= 0 {
		t.Fatalf("this machine: %d, %v", n, err)
	}
}
