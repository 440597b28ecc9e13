package auditpoll

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/lockstep/lockstep/internal/loadgen/report"
)

// auditor answers with its read's number as the stock, and fails the
// second read.
type auditor struct {
	mu    sync.Mutex
	reads int
}

func (a *auditor) Audit(context.Context, string, string, string) (report.Audit, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.reads++
	if a.reads == 2 {
		return report.Audit{}, errors.New("redis is down")
	}
	return report.Audit{Stock: a.reads}, nil
}

// Every observer takes every poll in order, a failed read as nil, and
// none after stop returns.
func TestEveryObserverTakesEveryPoll(t *testing.T) {
	var mu sync.Mutex
	got := map[string][]int{} // each observer's stock per poll, -1 for a failed read
	observe := func(name string) Observer {
		return Func(func(n int, _ time.Time, a *report.Audit) {
			mu.Lock()
			defer mu.Unlock()
			if len(got[name]) != n-1 {
				t.Errorf("%s: poll %d after %d polls", name, n, len(got[name]))
			}
			stock := -1
			if a != nil {
				stock = a.Stock
			}
			got[name] = append(got[name], stock)
		})
	}
	stop := Start(t.Context(), &auditor{}, "http://shop", "atomic", "sku-1", observe("first"), observe("second"))
	deadline := time.Now().Add(10 * time.Second)
	for {
		mu.Lock()
		n := len(got["second"])
		mu.Unlock()
		if n >= 3 || time.Now().After(deadline) {
			break
		}
		time.Sleep(Every / 5)
	}
	stop()
	mu.Lock()
	seen := len(got["first"])
	want := []int{1, -1, 3}
	for _, name := range []string{"first", "second"} {
		if len(got[name]) < 3 || got[name][0] != want[0] || got[name][1] != want[1] || got[name][2] != want[2] {
			t.Errorf("%s took %v, want %v first", name, got[name], want)
		}
	}
	mu.Unlock()
	time.Sleep(2 * Every)
	mu.Lock()
	defer mu.Unlock()
	if len(got["first"]) != seen {
		t.Errorf("polled %d times after stop", len(got["first"])-seen)
	}
}
