package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"

	"github.com/lockstep/lockstep/internal/launch"
	"github.com/lockstep/lockstep/internal/loadgen/plan"
	"github.com/lockstep/lockstep/nginx"
)

// frontDoors is the workshop's loadgen.FrontDoors: the limiter and the
// sold-out mark are each replica's process settings (cmd/shop's flags,
// given as LOCKSTEP_* in its environment), so a run that asks for other
// ones restarts every replica with them; limit-nginx is nginx's
// configuration, reloaded. A run that names none gets the flags' front
// door (base).
type frontDoors struct {
	base     plan.FrontDoor
	replicas []*replica
	proxy    *frontProxy

	mu      sync.Mutex
	current plan.FrontDoor
}

func newFrontDoors(base plan.FrontDoor) *frontDoors {
	return &frontDoors{base: base, current: base}
}

// env is the replicas' settings for the current front door, read at each
// (re)start of a replica: limit-nginx is none in the replicas.
func (f *frontDoors) env() []string {
	f.mu.Lock()
	fd := f.current
	f.mu.Unlock()
	if fd.Limiter == plan.LimitNginx {
		fd = plan.FrontDoor{SoldOutMarkTTL: fd.SoldOutMarkTTL}
	}
	limiter := fd.Limiter
	if limiter == "" {
		limiter = plan.LimitNone
	}
	return []string{
		"LOCKSTEP_LIMITER=" + limiter,
		"LOCKSTEP_LIMIT_BUYER=" + strconv.Itoa(fd.Buyer),
		"LOCKSTEP_LIMIT_BUYER_BURST=" + strconv.Itoa(max(fd.BuyerBurst, 1)),
		"LOCKSTEP_LIMIT_GLOBAL=" + strconv.Itoa(fd.Global),
		"LOCKSTEP_LIMIT_GLOBAL_BURST=" + strconv.Itoa(max(fd.GlobalBurst, 1)),
		"LOCKSTEP_SOLDOUT_MARK_TTL=" + fd.SoldOutMarkTTL.D().String(),
	}
}

// nginxLimit is limit-nginx's rates for fd, nil for the other limiters.
func nginxLimit(fd plan.FrontDoor) *nginx.Limit {
	if fd.Limiter != plan.LimitNginx {
		return nil
	}
	return &nginx.Limit{PerBuyer: fd.Buyer, BuyerBurst: max(fd.BuyerBurst, 1), Global: fd.Global, GlobalBurst: max(fd.GlobalBurst, 1)}
}

// errNginxNeeded: a run asks for limit-nginx and the proxy is Go's.
var errNginxNeeded = errors.New("limit-nginx lives in nginx: the Go proxy cannot limit")

// Use puts fd (nil: the flags') before the stages and returns once every
// replica is ready behind it. A front door that did not change restarts
// nothing.
func (f *frontDoors) Use(ctx context.Context, fd *plan.FrontDoor) error {
	want := f.base
	if fd != nil {
		want = *fd
	}
	f.mu.Lock()
	was := f.current
	f.current = want
	f.mu.Unlock()
	if want == was {
		return nil
	}
	if wantLimit, wasLimit := nginxLimit(want), nginxLimit(was); !sameLimit(wantLimit, wasLimit) {
		if f.proxy.nginx == nil {
			return errNginxNeeded
		}
		if err := f.proxy.reload(ctx, nginxLimit(want)); err != nil {
			return err
		}
	}
	if shopSide(want) == shopSide(was) {
		return nil
	}
	return restartReplicas(ctx, f.replicas)
}

// shopSide is what of a front door the replicas hold.
func shopSide(fd plan.FrontDoor) plan.FrontDoor {
	if fd.Limiter == plan.LimitNginx {
		return plan.FrontDoor{SoldOutMarkTTL: fd.SoldOutMarkTTL}
	}
	return fd
}

func sameLimit(a, b *nginx.Limit) bool {
	return a == nil && b == nil || a != nil && b != nil && *a == *b
}

// restartReplicas ends every replica politely, all at once, and waits
// until each supervisor started it again and it is ready.
func restartReplicas(ctx context.Context, replicas []*replica) error {
	errs := make([]error, len(replicas))
	var wg sync.WaitGroup
	for i, r := range replicas {
		wg.Go(func() {
			if err := r.sup.restart(); err != nil {
				errs[i] = err
				return
			}
			// No exit check: the supervisor's restart count includes
			// these restarts.
			errs[i] = launch.WaitHTTPReady(ctx, r.url()+"/readyz", nil)
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("restarting the replicas with the front door: %w", err)
	}
	return nil
}
