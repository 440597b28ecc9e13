// Package proc reads what the workshop needs to know about processes from
// Linux's /proc: state, process group and CPU time.
package proc

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Stat is the part of /proc/<pid>/stat the workshop uses.
type Stat struct {
	State byte // R, S, D, Z, ...
	PGrp  int
	// CPU is user plus system time.
	CPU time.Duration
	// RSS is the resident memory in bytes (0 when the line stops short).
	RSS int64
}

// Alive reports whether the process runs (a zombie has exited).
func (s Stat) Alive() bool { return s.State != 'Z' }

// clockTicksPerSecond is USER_HZ, which Linux fixes at 100 for /proc.
const clockTicksPerSecond = 100

// Read parses /proc/<pid>/stat.
func Read(pid int) (Stat, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return Stat{}, fmt.Errorf("process %d: %w", pid, err)
	}
	return parse(string(b))
}

func parse(line string) (Stat, error) {
	// The command (field 2) is in parentheses and may hold spaces or
	// parentheses itself; the fields after the last ')' are plain.
	end := strings.LastIndexByte(line, ')')
	if end < 0 {
		return Stat{}, errors.New("proc: malformed stat")
	}
	f := strings.Fields(line[end+1:])
	// f[0] is field 3 (state), f[2] field 5 (pgrp), f[11] and f[12] fields
	// 14 and 15 (utime, stime).
	if len(f) < 13 || len(f[0]) != 1 {
		return Stat{}, errors.New("proc: short stat")
	}
	pgrp, err1 := strconv.Atoi(f[2])
	utime, err2 := strconv.ParseInt(f[11], 10, 64)
	stime, err3 := strconv.ParseInt(f[12], 10, 64)
	if err := errors.Join(err1, err2, err3); err != nil {
		return Stat{}, fmt.Errorf("proc: malformed stat: %w", err)
	}
	st := Stat{State: f[0][0], PGrp: pgrp, CPU: time.Duration(utime+stime) * time.Second / clockTicksPerSecond}
	if len(f) > 21 { // f[21] is field 24, rss in pages
		pages, err := strconv.ParseInt(f[21], 10, 64)
		if err != nil {
			return Stat{}, fmt.Errorf("proc: malformed rss: %w", err)
		}
		st.RSS = pages * int64(os.Getpagesize())
	}
	return st, nil
}

// Group lists the live processes of process group pgid.
func Group(pgid int) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if st, err := Read(pid); err == nil && st.Alive() && st.PGrp == pgid {
			pids = append(pids, pid)
		}
	}
	return pids
}

// Alive reports whether pid is a live process.
func Alive(pid int) bool {
	st, err := Read(pid)
	return err == nil && st.Alive()
}

// Cmdline returns the process's command line, arguments separated by spaces.
func Cmdline(pid int) (string, error) {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline"))
	if err != nil {
		return "", fmt.Errorf("process %d: %w", pid, err)
	}
	return strings.TrimSpace(strings.ReplaceAll(string(b), "\x00", " ")), nil
}
