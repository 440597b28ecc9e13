package inventory

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/lockstep/lockstep/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// failWrites fails, without sending it, every transaction that writes key:
// with a reply Redis would give (replied), or as a lost connection.
type failWrites struct {
	key     string
	replied bool
	cancel  context.CancelFunc // ends the sale's context first, if set
}

type fakeReply string

func (e fakeReply) Error() string { return string(e) }
func (fakeReply) RedisError()     {}

func (f failWrites) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (f failWrites) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }
func (f failWrites) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, c := range cmds {
			if c.Name() == "set" && len(c.Args()) > 1 && c.Args()[1] == f.key {
				if f.cancel != nil {
					f.cancel()
				}
				var err error = errors.New("read tcp: i/o timeout")
				if f.replied {
					err = fakeReply("ERR injected refusal")
				}
				for _, c := range cmds {
					c.SetErr(err)
				}
				return err
			}
		}
		return next(ctx, cmds)
	}
}

// A sale across segments on a Redis Cluster writes each segment in its own
// transaction; when the second fails, the first is undone — also when the
// sale's context ended — and the answer says whether the sale's outcome is
// known.
func TestCommitEachUndoesWrittenParts(t *testing.T) {
	for _, tc := range []struct {
		name        string
		replied     bool
		cancelFirst bool
		unknown     bool
	}{
		{"refused by Redis", true, false, false},
		{"reply lost", false, false, true},
		{"sale's context ended", true, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rdb := redistest.Start(t).Client(t)
			s := &store{rdb: rdb, stage: "t"}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			tags := []string{"sku:0:0", "sku:1:0"}
			for _, tag := range tags {
				if err := s.initialise(ctx, tag, 5); err != nil {
					t.Fatal(err)
				}
			}
			hook := failWrites{key: s.keys(tags[1]).stock(), replied: tc.replied}
			if tc.cancelFirst {
				hook.cancel = cancel
			}
			rdb.AddHook(hook)
			err := s.commitEach(ctx, tags, []int64{5, 5}, []int64{2, 1})
			if !errors.Is(err, ErrUnavailable) || errors.Is(err, ErrOutcomeUnknown) != tc.unknown {
				t.Fatalf("commitEach = %v; want unavailable, outcome unknown %t", err, tc.unknown)
			}
			for _, tag := range tags {
				c, err := s.counts(context.Background(), tag, 0)
				if err != nil {
					t.Fatal(err)
				}
				if c.Stock != 5 || c.Sold != 0 {
					t.Errorf("%s after the undo: %+v, want stock 5 and nothing sold", tag, c)
				}
			}
			if tc.unknown && !strings.Contains(err.Error(), "i/o timeout") {
				t.Errorf("error %v does not say what failed", err)
			}
		})
	}
}
