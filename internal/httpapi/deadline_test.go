package httpapi

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"
)

type ctxKey struct{}

// observed is what a caller can see of a context.
type observed struct {
	done       bool
	err, cause error
	deadline   time.Time
	value      any
	childDone  bool // a WithCancel child's, if the case makes one
}

// observe reads ctx as a careful caller would: Cause after Err.
func observe(ctx, child context.Context) observed {
	o := observed{err: ctx.Err(), cause: context.Cause(ctx), value: ctx.Value(ctxKey{})}
	o.deadline, _ = ctx.Deadline()
	select {
	case <-ctx.Done():
		o.done = true
	default:
	}
	if child != nil {
		select {
		case <-child.Done():
			o.childDone = true
		default:
		}
	}
	return o
}

// withLazyTimeout behaves as context.WithTimeout in every case a deduct can
// meet: deadline reached or not, canceled before or after anyone waited,
// parent canceled, parent with an earlier deadline.
func TestLazyTimeoutBehavesAsWithTimeout(t *testing.T) {
	parentCause := errors.New("client went away")
	for _, tc := range []struct {
		name string
		// parentDeadline, when set, bounds the parent.
		parentDeadline time.Duration
		// child makes a WithCancel child of the context at the start
		// (which waits on it from then on).
		child bool
		// run does, in fake time, what happens to the contexts.
		run func(cancel context.CancelFunc, cancelParent context.CancelCauseFunc, ctx context.Context)
	}{
		{name: "deadline not reached", run: func(_ context.CancelFunc, _ context.CancelCauseFunc, _ context.Context) {
			time.Sleep(time.Second)
		}},
		{name: "deadline reached", child: true, run: func(_ context.CancelFunc, _ context.CancelCauseFunc, ctx context.Context) {
			<-ctx.Done()
		}},
		{name: "asked before the deadline, then reached", run: func(_ context.CancelFunc, _ context.CancelCauseFunc, ctx context.Context) {
			_ = ctx.Err()
			time.Sleep(11 * time.Second)
		}},
		{name: "deadline reached, no one waiting", run: func(_ context.CancelFunc, _ context.CancelCauseFunc, _ context.Context) {
			time.Sleep(11 * time.Second)
		}},
		{name: "canceled before anyone waited", run: func(cancel context.CancelFunc, _ context.CancelCauseFunc, _ context.Context) {
			cancel()
		}},
		{name: "canceled while waited on", child: true, run: func(cancel context.CancelFunc, _ context.CancelCauseFunc, ctx context.Context) {
			go func() { time.Sleep(time.Second); cancel() }()
			<-ctx.Done()
		}},
		{name: "parent canceled", run: func(_ context.CancelFunc, cancelParent context.CancelCauseFunc, _ context.Context) {
			cancelParent(parentCause)
		}},
		{name: "parent canceled, child waiting", child: true, run: func(_ context.CancelFunc, cancelParent context.CancelCauseFunc, _ context.Context) {
			cancelParent(parentCause)
		}},
		{name: "parent deadline first", parentDeadline: 2 * time.Second, run: func(_ context.CancelFunc, _ context.CancelCauseFunc, ctx context.Context) {
			<-ctx.Done()
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got [2]observed
			for i, withTimeout := range []func(context.Context, time.Duration) (context.Context, context.CancelFunc){context.WithTimeout, lazyTimeout} {
				synctest.Test(t, func(t *testing.T) {
					parent, cancelParent := context.WithCancelCause(context.WithValue(context.Background(), ctxKey{}, "v"))
					defer cancelParent(nil)
					if tc.parentDeadline > 0 {
						var cancelDeadline context.CancelFunc
						parent, cancelDeadline = context.WithTimeout(parent, tc.parentDeadline)
						defer cancelDeadline()
					}
					ctx, cancel := withTimeout(parent, 10*time.Second)
					defer cancel()
					var child context.Context
					if tc.child {
						var cancelChild context.CancelFunc
						child, cancelChild = context.WithCancel(ctx)
						defer cancelChild()
					}
					tc.run(cancel, cancelParent, ctx)
					synctest.Wait()
					got[i] = observe(ctx, child)
				})
			}
			if got[0] != got[1] {
				t.Errorf("WithTimeout:     %+v\nwithLazyTimeout: %+v", got[0], got[1])
			}
		})
	}
}

// A sale asks Err right before its stock write: while nothing ended, that
// must set up no timer, or every deduct pays for one.
func TestLazyTimeoutErrSetsNothingUpWhileLive(t *testing.T) {
	ctx := withLazyTimeout(context.Background(), time.Minute)
	defer ctx.cancel()
	if err := ctx.Err(); err != nil {
		t.Fatal(err)
	}
	if ctx.timed != nil {
		t.Error("Err set up the timed context while nothing had ended")
	}
}

func lazyTimeout(parent context.Context, timeout time.Duration) (context.Context, context.CancelFunc) {
	ctx := withLazyTimeout(parent, timeout)
	return ctx, ctx.cancel
}
