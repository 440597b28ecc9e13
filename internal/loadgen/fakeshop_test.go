package loadgen

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockstep/lockstep/internal/loadgen/plan"
	"github.com/lockstep/lockstep/internal/loadgen/report"
	"github.com/lockstep/lockstep/internal/loadgen/shopapi"
	"github.com/lockstep/lockstep/internal/shoprules"
)

// fakeShop follows the shop's HTTP contract with in-memory stages whose
// behaviour is known exactly, so the loadgen's accounting can be checked
// without Redis or the real shop:
//   - "racy" reads, waits the work time, then writes: it oversells;
//   - "atomic" checks and decrements under a mutex: it never oversells;
//   - "stuck" crashes holding a lock that never expires;
//   - "expiring" crashes holding a lock that expires after lock_ttl;
//   - "stall" stalls every request for 500 ms, 200 ms after its first sale;
//   - "twice" runs every fifth sale twice and answers it once, as a script
//     resent after its reply was lost: the audit balances all the same;
//   - "absent" is listed as unavailable.
//
// Replicas are handlers sharing the state (as shops share Redis); "racy"
// also counts a foreign unlock on every tenth sale.
// A crash closes the connection without an answer, like a process exit.
type fakeShop struct {
	mu     sync.Mutex
	stages map[string]*fakeStage
}

type fakeStage struct {
	initial, stock, sold int
	foreignUnlocks       int
	faults               plan.Faults
	lockedUntil          time.Time // zero: free; far future: stuck
	// inside counts racy's sales between read and write; maxHolders the
	// most at once, reported with the track_holders fault as the shop does.
	inside, maxHolders int64
}

// fakeSetUp is a fake shop behind a round-robin proxy.
type fakeSetUp struct {
	shop     *fakeShop
	proxy    string
	replicas []string
	// skip is 1 + the index of a replica the proxy passes over, as nginx
	// does for fail_timeout after a replica failed; 0 skips none.
	skip *atomic.Int64
}

func startFakeShop(t *testing.T, replicas int) fakeSetUp {
	t.Helper()
	f := &fakeShop{stages: map[string]*fakeStage{}}
	setUp := fakeSetUp{shop: f}
	var handlers []http.Handler
	for i := range replicas {
		h := f.handler(fmt.Sprintf("shop-%d", i+1))
		handlers = append(handlers, h)
		srv := httptest.NewServer(h)
		t.Cleanup(srv.Close)
		setUp.replicas = append(setUp.replicas, srv.URL)
	}
	var next atomic.Int64
	setUp.skip = new(atomic.Int64)
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Server", "fakeproxy/1.0")
		i := int(next.Add(1)) % len(handlers)
		if int64(i+1) == setUp.skip.Load() {
			i = (i + 1) % len(handlers)
		}
		handlers[i].ServeHTTP(w, r)
	}))
	t.Cleanup(proxy.Close)
	setUp.proxy = proxy.URL
	return setUp
}

// run runs the scenario doc against the fake shop, through its proxy.
func (setUp fakeSetUp) run(t *testing.T, doc string) *report.Report {
	t.Helper()
	sc, err := ParseScenario([]byte(doc), shoprules.Shop())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rep, err := Run(ctx, Config{Target: setUp.proxy, ReplicaURLs: setUp.replicas, Scenario: sc})
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

func (f *fakeShop) stage(id string) *fakeStage {
	s, ok := f.stages[id]
	if !ok {
		s = &fakeStage{}
		f.stages[id] = s
	}
	return s
}

func (f *fakeShop) handler(name string) http.Handler {
	mux := http.NewServeMux()
	reply := func(w http.ResponseWriter, status int, body any) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(body)
	}
	fail := func(w http.ResponseWriter, status int, code string) {
		reply(w, status, map[string]string{"error": code, "message": code})
	}
	withReplica := func(h http.HandlerFunc) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("X-Replica", name)
			h(w, r)
		}
	}
	mux.HandleFunc("GET /readyz", withReplica(func(w http.ResponseWriter, r *http.Request) { reply(w, 200, map[string]string{"status": "ok"}) }))
	mux.HandleFunc("GET /healthz", withReplica(func(w http.ResponseWriter, r *http.Request) { reply(w, 200, map[string]string{"status": "ok"}) }))
	mux.HandleFunc("GET /api/stages", withReplica(func(w http.ResponseWriter, r *http.Request) {
		infos := []shopapi.StageInfo{
			{ID: "racy", Title: "GET then SET", Article: "Redis 分布式锁 (GET then SET)", Mechanism: "GET/SET", Defect: "oversells", Available: true},
			{ID: "atomic", Title: "atomic", Available: true},
			{ID: "stuck", Title: "stuck", Available: true},
			{ID: "expiring", Title: "expiring", Available: true},
			{ID: "stall", Title: "stalls 500 ms", Available: true},
			{ID: "twice", Title: "counts every fifth sale twice", Available: true},
			{ID: "absent", Title: "absent", Reason: "needs three Redis masters"},
		}
		f.mu.Lock()
		for i := range infos {
			infos[i].Faults = f.stage(infos[i].ID).faults
		}
		f.mu.Unlock()
		reply(w, 200, map[string][]shopapi.StageInfo{"stages": infos})
	}))
	mux.HandleFunc("POST /api/stages/{stage}/reset", withReplica(func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			SKU   string `json:"sku"`
			Stock int    `json:"stock"`
		}
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil || body.Stock < 0 {
			fail(w, 400, "bad_request")
			return
		}
		f.mu.Lock()
		s := f.stage(r.PathValue("stage"))
		s.initial, s.stock, s.sold, s.foreignUnlocks, s.lockedUntil, s.maxHolders = body.Stock, body.Stock, 0, 0, time.Time{}, 0
		f.mu.Unlock()
		reply(w, 200, body)
	}))
	mux.HandleFunc("PUT /api/stages/{stage}/faults", withReplica(func(w http.ResponseWriter, r *http.Request) {
		var faults plan.Faults
		if err := json.NewDecoder(r.Body).Decode(&faults); err != nil {
			fail(w, 400, "bad_request")
			return
		}
		f.mu.Lock()
		f.stage(r.PathValue("stage")).faults = faults
		f.mu.Unlock()
		reply(w, 200, faults)
	}))
	mux.HandleFunc("GET /api/stages/{stage}/audit", withReplica(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		s := f.stage(r.PathValue("stage"))
		foreign := s.foreignUnlocks
		a := report.Audit{Initial: s.initial, Stock: s.stock, Sold: s.sold, Oversold: max(0, s.sold-s.initial), Consistent: s.stock+s.sold == s.initial, ForeignUnlocks: &foreign}
		if s.faults.TrackHolders {
			most := s.maxHolders
			a.MaxHolders = &most
		}
		f.mu.Unlock()
		reply(w, 200, a)
	}))
	mux.HandleFunc("POST /api/stages/{stage}/deduct", withReplica(func(w http.ResponseWriter, r *http.Request) {
		id := r.PathValue("stage")
		if qty, err := strconv.Atoi(r.URL.Query().Get("qty")); err != nil || qty != 1 {
			fail(w, 400, "bad_request")
			return
		}
		f.mu.Lock()
		s := f.stage(id)
		faults := s.faults
		switch id {
		case "racy":
			stock := s.stock
			s.inside++
			s.maxHolders = max(s.maxHolders, s.inside)
			f.mu.Unlock()
			if stock <= 0 {
				f.mu.Lock()
				s.inside--
				f.mu.Unlock()
				fail(w, 409, "sold_out")
				return
			}
			time.Sleep(faults.Work.D())
			f.mu.Lock()
			s.inside--
			s.stock, s.sold = stock-1, s.sold+1
			if s.sold%10 == 0 {
				s.foreignUnlocks++
			}
			f.mu.Unlock()
			reply(w, 200, map[string]any{"stage": id, "remaining": stock - 1, "replica": name})
			return
		case "stall":
			// Stalls every request from 200 ms after its first sale for
			// 500 ms, as a server in a GC pause or a failover would.
			if s.lockedUntil.IsZero() {
				s.lockedUntil = time.Now().Add(200 * time.Millisecond)
			}
			if end := s.lockedUntil.Add(500 * time.Millisecond); !time.Now().Before(s.lockedUntil) && time.Now().Before(end) {
				f.mu.Unlock()
				time.Sleep(time.Until(end))
				f.mu.Lock()
			}
		case "stuck", "expiring":
			if time.Now().Before(s.lockedUntil) {
				f.mu.Unlock()
				fail(w, 423, "lock_busy")
				return
			}
			if faults.CrashHoldingLock {
				s.lockedUntil = time.Now().Add(faults.LockTTL.D())
				if id == "stuck" {
					s.lockedUntil = time.Now().Add(time.Hour)
				}
				f.mu.Unlock()
				panic(http.ErrAbortHandler) // the connection closes with no answer
			}
		}
		defer f.mu.Unlock()
		if s.stock <= 0 {
			fail(w, 409, "sold_out")
			return
		}
		if id == "twice" && s.sold%5 == 4 && s.stock >= 2 {
			s.stock--
			s.sold++
		}
		s.stock--
		s.sold++
		reply(w, 200, map[string]any{"stage": id, "remaining": s.stock, "replica": name})
	}))
	return mux
}
