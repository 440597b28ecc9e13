package main

import (
	"context"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestContendersExclude runs every contender briefly under contention and
// checks that it really excludes: no goroutine ever found another inside,
// and the INCR counter matches the acquisitions.
func TestContendersExclude(t *testing.T) {
	srv := startTestRedis(t)
	ctx := t.Context()
	b, err := newBench(ctx, srv.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	for _, c := range allContenders(time.Millisecond) {
		t.Run(c.name, func(t *testing.T) {
			tg := target{addr: srv.Addr, version: srv.Version, lease: 10 * time.Second, requests: &requestCounter{}}
			s, err := c.open(tg)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			run, err := b.contended(ctx, s, tg.requests, "test:"+c.name, 8, 300*time.Millisecond)
			if err != nil {
				t.Fatal(err)
			}
			if run.acquisitions == 0 {
				t.Fatal("no acquisitions")
			}
			if run.overlaps != 0 {
				t.Errorf("%d overlapping critical sections", run.overlaps)
			}
			if run.counter != run.acquisitions {
				t.Errorf("counter %d, acquisitions %d", run.counter, run.acquisitions)
			}
			if run.requests == 0 || run.commands.lockCommands(0) <= 0 {
				t.Errorf("commands not counted: %d requests, %d server commands", run.requests, run.commands.lockCommands(0))
			}
		})
	}
}

// TestStalledContenderIsReported checks that a library call that never
// returns ends the phase with an error instead of hanging the comparison.
func TestStalledContenderIsReported(t *testing.T) {
	srv := startTestRedis(t)
	b, err := newBench(t.Context(), srv.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	b.stallLimit, b.stacks = 200*time.Millisecond, io.Discard
	for _, tc := range []struct {
		name   string
		hangIn string
		phase  func(s session) error
	}{
		{"contended, Unlock hangs", "unlock", func(s session) error {
			_, err := b.contended(t.Context(), s, &requestCounter{}, "test:stall", 4, 50*time.Millisecond)
			return err
		}},
		{"uncontended, Lock ignores ctx", "lock", func(s session) error {
			_, err := b.uncontended(t.Context(), s, &requestCounter{}, "test:stall", 50*time.Millisecond)
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &hangingSession{hangIn: tc.hangIn, release: make(chan struct{})}
			defer close(s.release)
			start := time.Now()
			err := tc.phase(s)
			if err == nil || !strings.Contains(err.Error(), "stalled") {
				t.Fatalf("err = %v, want a stall", err)
			}
			if took := time.Since(start); took > 2*time.Second {
				t.Errorf("stall reported after %v", took)
			}
		})
	}
}

// hangingSession's lockers never return from the call named by hangIn
// until release is closed, whatever their context says.
type hangingSession struct {
	hangIn  string
	release chan struct{}
}

func (s *hangingSession) Locker(string) locker { return s }
func (s *hangingSession) Close() error         { return nil }

func (s *hangingSession) Lock(context.Context) error {
	if s.hangIn == "lock" {
		<-s.release
	}
	return nil
}

func (s *hangingSession) Unlock(context.Context) error {
	if s.hangIn == "unlock" {
		<-s.release
	}
	return nil
}

// startTestRedis starts the command's own server; without redis-server the
// test is skipped, except under CI=true where that is a failure.
func startTestRedis(t *testing.T) *redisServer {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("redis-server not found (CI=true): %v", err)
		}
		t.Skipf("redis-server not found: %v", err)
	}
	srv, err := startRedis(t.Context(), bin, "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	return srv
}

func TestRespScannerCountsAcrossSplits(t *testing.T) {
	stream := "*1\r\n$4\r\nPING\r\n" +
		"*3\r\n$3\r\nSET\r\n$12\r\nkey*2\r\n$3\r\nx\r\n$0\r\n\r\n" + // a bulk string that looks like headers
		"*2\r\n$7\r\nEVALSHA\r\n$40\r\n" + strings.Repeat("a", 40) + "\r\n" +
		"PING\r\n" // inline
	const want = 4
	for split := range len(stream) + 1 {
		for _, step := range []int{1, 3, 7, len(stream)} {
			var s respScanner
			got := s.scan([]byte(stream[:split]))
			for rest := stream[split:]; len(rest) > 0; {
				n := min(step, len(rest))
				got += s.scan([]byte(rest[:n]))
				rest = rest[n:]
			}
			if got != want {
				t.Fatalf("split at %d, then chunks of %d: counted %d requests, want %d", split, step, got, want)
			}
		}
	}
}

func TestParseStats(t *testing.T) {
	before, err := parseStats("# Stats\r\ntotal_commands_processed:10\r\n# Commandstats\r\ncmdstat_info:calls=2,usec=36,usec_per_call=18.00\r\ncmdstat_get:calls=5,usec=2\r\n")
	if err != nil {
		t.Fatal(err)
	}
	after, err := parseStats("total_commands_processed:31\r\ncmdstat_info:calls=3,usec=40\r\ncmdstat_get:calls=9,usec=2\r\ncmdstat_incr:calls=4,usec=2\r\ncmdstat_evalsha:calls=12,usec=9\r\n")
	if err != nil {
		t.Fatal(err)
	}
	d := after.minus(before)
	// 21 commands: 1 INFO, 4 INCR, 12 EVALSHA of which 6 baseline → 10 of the lock's.
	if got := d.lockCommands(6); got != 10 {
		t.Errorf("lockCommands = %d, want 10", got)
	}
	got := d.breakdown(2, 6)
	want := []commandShare{{"evalsha", 3}, {"get", 2}}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("breakdown = %v, want %v", got, want)
	}
	if _, err := parseStats("cmdstat_get:calls=1"); err == nil {
		t.Error("stats without total_commands_processed parsed")
	}
}

func TestJainIndex(t *testing.T) {
	for _, tc := range []struct {
		counts []int64
		want   float64
	}{
		{[]int64{5, 5, 5, 5}, 1},
		{[]int64{8, 0, 0, 0}, 0.25},
		{[]int64{0, 0}, 0},
	} {
		if got := jainIndex(tc.counts); got != tc.want {
			t.Errorf("jainIndex(%v) = %v, want %v", tc.counts, got, tc.want)
		}
	}
}

func TestRatiosPickTheFastestPeer(t *testing.T) {
	row := func(name string, peer bool, acqPerSec, p99 float64) result {
		return result{Name: name, Peer: peer, Contended: &contendedFigures{AcqPerSec: acqPerSec, WaitP99: p99, WaitPerAcq: 1, WaitMax: 1}}
	}
	stalled := result{Name: "stalled-peer", Peer: true, Error: "stalled"}
	results := []result{row("slow", true, 100, 10), stalled, row("fast", true, 400, 40), row(lockstepDefault, false, 800, 20), row("lockstep-nocohort", false, 9000, 1)}
	rt := computeRatios(results)
	if rt == nil || rt.BestPeer != "fast" || rt.AcqPerSec != 2 || rt.WaitP99 != 0.5 {
		t.Fatalf("ratios = %+v, want best peer fast, acq/s ×2, p99 ×0.5", rt)
	}
	if computeRatios(results[:3]) != nil {
		t.Error("ratios without a lockstep row")
	}
	other := *rt
	other.BestPeer, other.AcqPerSec = "slow", 4
	third := *rt
	third.AcqPerSec = 3
	med := medianRatios([]round{{Ratios: rt}, {Ratios: &other}, {}, {Ratios: &third}})
	if med == nil || med.AcqPerSec != 3 || med.BestPeer != "fast / slow" {
		t.Errorf("median ratios = %+v, want acq/s ×3 over fast / slow", med)
	}
	if medianRatios([]round{{Ratios: rt}}) != nil {
		t.Error("median of one round")
	}
}

func TestSelectContenders(t *testing.T) {
	all := allContenders(time.Millisecond)
	for _, tc := range []struct {
		list string
		want string // names, comma-separated; empty: an error
	}{
		{"all", strings.Join(names(all), ",")},
		{"lockstep", "lockstep"},
		{"redislock,lockstep-nocohort", "redislock-100ms,redislock-fast,lockstep-nocohort"},
		{"rueidislock-defaults, redsync", "rueidislock-defaults,redsync"},
		{"redis", ""},
		{"lockstep,nope", ""},
	} {
		got, err := selectContenders(all, tc.list)
		switch {
		case tc.want == "" && err == nil:
			t.Errorf("%q: selected %v, want an error", tc.list, names(got))
		case tc.want != "" && err != nil:
			t.Errorf("%q: %v", tc.list, err)
		case tc.want != "" && strings.Join(names(got), ",") != tc.want:
			t.Errorf("%q: selected %v, want %s", tc.list, names(got), tc.want)
		}
	}
}
