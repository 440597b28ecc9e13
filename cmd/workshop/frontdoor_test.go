package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/lockstep/lockstep/internal/frontdoor"
	"github.com/lockstep/lockstep/internal/launch"
	"github.com/lockstep/lockstep/internal/loadgen/plan"
)

// TestLimiterNamesAreFrontdoors: plan names the limiters without importing
// internal/frontdoor (it imports no Redis client); the names must agree.
func TestLimiterNamesAreFrontdoors(t *testing.T) {
	want := []string{frontdoor.None, frontdoor.Local, frontdoor.Redis, frontdoor.Nginx}
	if !slices.Equal(plan.Limiters, want) {
		t.Fatalf("plan.Limiters = %v, frontdoor's names are %v", plan.Limiters, want)
	}
}

// TestFrontDoorsReloadNginx: a run that asks for limit-nginx gets
// limit_req in the running nginx (a reload, same address), and the next
// run that asks for none gets it taken out again; the replicas, whose
// settings did not change, are not restarted.
func TestFrontDoorsReloadNginx(t *testing.T) {
	bin, err := launch.NginxBinary()
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	shop := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer shop.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	p, err := startNginx(ctx, bin, []string{shop.Listener.Addr().String()}, nil, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer p.stop()
	doors := newFrontDoors(plan.FrontDoor{Limiter: plan.LimitNone})
	doors.proxy = p
	client := &http.Client{Timeout: 5 * time.Second}
	refused := func() int {
		n := 0
		for range 10 {
			resp, err := client.Post(p.url+"/api/stages/atomic/deduct?sku=sku-1&user=bot-0", "", nil)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode == http.StatusTooManyRequests {
				n++
			}
		}
		return n
	}
	for _, tc := range []struct {
		fd      *plan.FrontDoor
		refused int
	}{
		{nil, 0},
		{&plan.FrontDoor{Limiter: plan.LimitNginx, Buyer: 1, BuyerBurst: 2}, 8},
		{nil, 0},
	} {
		if err := doors.Use(ctx, tc.fd); err != nil {
			t.Fatal(err)
		}
		if got := refused(); got != tc.refused {
			t.Errorf("front door %+v: %d of 10 requests of one buyer refused, want %d", tc.fd, got, tc.refused)
		}
	}
}

// TestFrontDoorReaderReadsAReplica: the live page's front door of a
// replica is its mark's gauges and its limiter's refusals summed.
func TestFrontDoorReaderReadsAReplica(t *testing.T) {
	shop := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(`# HELP lockstep_soldout_marks SKUs
# TYPE lockstep_soldout_marks gauge
lockstep_soldout_marks 2
lockstep_soldout_mark_listening 1
lockstep_frontdoor_refused_total{scope="buyer",stage="atomic"} 7
lockstep_frontdoor_refused_total{scope="global",stage="atomic"} 3
lockstep_frontdoor_refused_total{scope="buyer",stage="naive"} 0
lockstep_soldout_mark_answers_total{stage="atomic"} 99
`))
	}))
	defer shop.Close()
	ctx, cancel := context.WithCancel(context.Background())
	f := newFrontDoorReader()
	done := make(chan struct{})
	go func() { defer close(done); f.follow(ctx, []string{shop.URL}) }()
	deadline := time.Now().Add(5 * time.Second)
	for len(f.now()) == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	<-done
	want := []replicaDoor{{Replica: "shop-1", Marks: 2, Listening: true, Refused: 10}}
	if got := f.now(); !slices.Equal(got, want) {
		t.Fatalf("read %+v, want %+v", got, want)
	}
}
