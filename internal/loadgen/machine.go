package loadgen

import (
	"bufio"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/lockstep/lockstep/internal/loadgen/report"
	"github.com/lockstep/lockstep/internal/proc"
)

// DescribeMachine reads what the OS tells about this machine; fields it
// cannot learn stay empty.
func DescribeMachine() report.Machine {
	host, _ := os.Hostname()
	m := report.Machine{
		Hostname:  host,
		OS:        runtime.GOOS,
		Arch:      runtime.GOARCH,
		CPUs:      runtime.NumCPU(),
		GoVersion: runtime.Version(),
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(b))
	}
	m.CPUModel = procField("/proc/cpuinfo", "model name")
	if kb, err := strconv.Atoi(strings.TrimSuffix(procField("/proc/meminfo", "MemTotal"), " kB")); err == nil {
		m.MemoryMiB = kb / 1024
	}
	return m
}

// procField returns the value of the first "name: value" line of a /proc file.
func procField(path, name string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		key, value, ok := strings.Cut(sc.Text(), ":")
		if ok && strings.TrimSpace(key) == name {
			return strings.TrimSpace(value)
		}
	}
	return ""
}

// SelfCPU returns the CPU time (user + system) this process has used.
func SelfCPU() (time.Duration, error) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, fmt.Errorf("getrusage: %w", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), nil
}

// cpuSampler measures the cores each component uses over an interval.
type cpuSampler struct {
	processes func() map[string][]int
	start     time.Time
	self      time.Duration
	others    map[int]time.Duration
	groups    map[string][]int
}

func startCPUSampler(processes func() map[string][]int) *cpuSampler {
	s := &cpuSampler{processes: processes, start: time.Now(), others: map[int]time.Duration{}}
	s.self, _ = SelfCPU()
	if processes != nil {
		s.groups = processes()
		for _, pids := range s.groups {
			for _, pid := range pids {
				if st, err := proc.Read(pid); err == nil {
					s.others[pid] = st.CPU
				}
			}
		}
	}
	return s
}

// stop returns cores used per component since start. A process that exited
// in between (a crashed replica) is left out of its component's sum.
func (s *cpuSampler) stop() map[string]float64 {
	wall := time.Since(s.start).Seconds()
	if wall <= 0 {
		return nil
	}
	out := map[string]float64{}
	if self, err := SelfCPU(); err == nil {
		out["loadgen"] = (self - s.self).Seconds() / wall
	}
	for name, pids := range s.groups {
		var used time.Duration
		for _, pid := range pids {
			before, ok := s.others[pid]
			if !ok {
				continue
			}
			if now, err := proc.Read(pid); err == nil {
				used += now.CPU - before
			}
		}
		out[name] = used.Seconds() / wall
	}
	return out
}
