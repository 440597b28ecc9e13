package redistrace

import (
	"context"
	"errors"
	"testing"
	"testing/fstest"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
)

const script = `return redis.call("SET", KEYS[1], ARGV[1])`

func newTraced(t *testing.T) (*Tracer, *redis.Client) {
	t.Helper()
	tracer, err := New(fstest.MapFS{"scripts/set.lua": {Data: []byte(script)}})
	if err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(&redis.Options{Addr: miniredis.RunT(t).Addr()})
	t.Cleanup(func() { rdb.Close() })
	tracer.Attach(rdb)
	return tracer, rdb
}

// TestRecordsOneRequest checks a traced context's commands are recorded
// with their keys, arguments, replies and round trips, a script by its
// name even when sent whole (EVAL after NOSCRIPT), a MULTI/EXEC as one
// round trip, and an untraced command on the lock it holds as background.
func TestRecordsOneRequest(t *testing.T) {
	tracer, rdb := newTraced(t)
	ctx, tr := tracer.Start(context.Background())
	if err := redis.NewScript(script).Run(ctx, rdb, []string{"k:lock"}, "v").Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.Get(ctx, "k:lock")
		p.IncrBy(ctx, "sold", 2)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	rdb.Get(context.Background(), "k:lock")    // another goroutine, on its lock
	rdb.Get(context.Background(), "elsewhere") // not on its keys
	rec := tracer.Finish(tr)
	rdb.Get(ctx, "after") // after Finish

	type want struct {
		roundTrip       int
		command, script string
		keys            string
		reply           string
		background      bool
	}
	wants := []want{
		{1, "EVALSHA", "set.lua", "k:lock", "(error) NOSCRIPT No matching script. Please use EVAL.", false},
		{2, "EVAL", "set.lua", "k:lock", "OK", false},
		{3, "MULTI", "", "", "QUEUED", false},
		{3, "GET", "", "k:lock", "v", false},
		{3, "INCRBY", "", "sold", "2", false},
		{3, "EXEC", "", "", "[]", false},
		{0, "GET", "", "k:lock", "v", true},
	}
	if len(rec.Calls) != len(wants) || rec.RoundTrips != 3 {
		t.Fatalf("recorded %d calls in %d round trips, want %d in 3: %+v", len(rec.Calls), rec.RoundTrips, len(wants), rec.Calls)
	}
	for i, w := range wants {
		c := rec.Calls[i]
		keys := ""
		if len(c.Keys) > 0 {
			keys = c.Keys[0]
		}
		if c.RoundTrip != w.roundTrip || c.Command != w.command || c.Script != w.script || keys != w.keys || c.Background != w.background {
			t.Errorf("call %d: %+v, want %+v", i, c, w)
		}
		if w.reply != "[]" && c.Reply != w.reply && !(i == 0 && len(c.Reply) > 0) {
			t.Errorf("call %d reply %q, want %q", i, c.Reply, w.reply)
		}
		for _, a := range c.Args {
			if a == script {
				t.Errorf("call %d carries the script's body", i)
			}
		}
	}
}

// TestSamplerWaitsForAnOKRun checks Next returns the first ok run traced
// after it asked, and, when none comes in time, the latest run that was
// not ok.
func TestSamplerWaitsForAnOKRun(t *testing.T) {
	tracer, rdb := newTraced(t)
	s := NewSampler(tracer, func(ok bool) bool { return ok })
	sell := func(ok bool) func(context.Context) bool {
		return func(ctx context.Context) bool { rdb.Incr(ctx, "n"); return ok }
	}
	if s.Run(context.Background(), "a", sell(true)); s.waiting.Load() != 0 {
		t.Fatal("a run with nobody waiting armed something")
	}

	got := make(chan Sample[bool], 1)
	go func() {
		sample, found, err := s.Next(context.Background(), "a")
		if !found || err != nil {
			t.Errorf("Next: found %t err %v", found, err)
		}
		got <- sample
	}()
	for s.waiting.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	s.Run(context.Background(), "b", sell(true))  // another kind
	s.Run(context.Background(), "a", sell(false)) // not ok: Next waits on
	s.Run(context.Background(), "a", sell(true))
	sample := <-got
	if !sample.Result || sample.RoundTrips != 1 || sample.Calls[0].Reply != "4" {
		t.Errorf("sample %+v: want the fourth INCR, the ok run of kind a", sample)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	go func() {
		for s.waiting.Load() == 0 {
			time.Sleep(time.Millisecond)
		}
		s.Run(context.Background(), "a", sell(false))
	}()
	sample, found, err := s.Next(ctx, "a")
	if !found || !errors.Is(err, context.DeadlineExceeded) || sample.Result || len(sample.Calls) != 1 {
		t.Errorf("Next with no ok run: %+v found %t err %v; want the run that was not ok and the deadline", sample, found, err)
	}
	if s.waiting.Load() != 0 {
		t.Error("Next left its kind armed")
	}
}
