package main

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"
)

// TestMain lets the test binary be the contending processes of a
// multi-process run, as the command is: os.Executable is the test binary.
func TestMain(m *testing.M) {
	if spec, ok := os.LookupEnv(childEnv); ok {
		if err := runChild(context.Background(), spec, os.Stdin, os.Stdout); err != nil {
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestProcessesExclude runs every contender as two processes of four
// goroutines on one key: no critical section, in either process, found
// another under way, the INCR counter equals the acquisitions, and both
// processes acquired. The self-check contender, which locks nothing, must
// be caught overlapping: the check across processes works.
func TestProcessesExclude(t *testing.T) {
	srv := startTestRedis(t)
	ctx := t.Context()
	b, err := newBench(ctx, srv.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	cfg := config{duration: 400 * time.Millisecond, warmup: 50 * time.Millisecond, fastBackoff: time.Millisecond}
	tg := target{addr: srv.Addr, version: srv.Version, lease: 10 * time.Second}
	for _, c := range append(allContenders(cfg.fastBackoff), noLock) {
		t.Run(c.name, func(t *testing.T) {
			r := b.measureProcs(ctx, c, tg, cfg, shape{Procs: 2, Goroutines: 4})
			if r.Error != "" {
				t.Fatal(r.Error)
			}
			f := r.Contended
			if c.name == noLock.name {
				if f.Overlaps == 0 {
					t.Errorf("no overlaps seen without a lock (%d acquisitions)", f.Acquisitions)
				}
				return
			}
			if f.Overlaps != 0 {
				t.Errorf("%d overlapping critical sections", f.Overlaps)
			}
			if f.Counter != f.Acquisitions || f.Acquisitions == 0 {
				t.Errorf("counter %d, acquisitions %d", f.Counter, f.Acquisitions)
			}
			if f.Processes != 2 || len(f.PerProcess) != 2 || f.ProcessFairness <= 0 {
				t.Errorf("per process %v, fairness %.2f: want two processes' counts", f.PerProcess, f.ProcessFairness)
			}
			// lockstep's processes take turns in FIFO order (docs/lock.md's claim).
			if c.name == lockstepDefault && f.ProcessFairness < 0.9 {
				t.Errorf("fairness between processes %.2f (per process %v), want ≥ 0.9", f.ProcessFairness, f.PerProcess)
			}
			if f.CmdsPerAcq <= 0 || f.ReqsPerAcq <= 0 {
				t.Errorf("commands not counted: %.2f server commands, %.2f requests per acquisition", f.CmdsPerAcq, f.ReqsPerAcq)
			}
		})
	}
}

func TestParseShapes(t *testing.T) {
	for _, tc := range []struct {
		list string
		want string // shapes, comma-separated; empty: an error
	}{
		{"2x32,3x21, 4x16,8x8", "2x32,3x21,4x16,8x8"},
		{"4", "4x64"},
		{"1x64,2", "1x64,2x64"},
		{"0x8", ""},
		{"2x0", ""},
		{"2y3", ""},
		{"", ""},
	} {
		shapes, err := parseShapes(tc.list, 64)
		var got []string
		for _, s := range shapes {
			got = append(got, s.String())
		}
		switch {
		case tc.want == "" && err == nil:
			t.Errorf("%q: parsed %v, want an error", tc.list, got)
		case tc.want != "" && err != nil:
			t.Errorf("%q: %v", tc.list, err)
		case tc.want != "" && strings.Join(got, ",") != tc.want:
			t.Errorf("%q: parsed %v, want %s", tc.list, got, tc.want)
		}
	}
}
