package shop_test

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/lockstep/lockstep/internal/redistest"
	"github.com/lockstep/lockstep/internal/redistrace"
)

type traced struct {
	Sold       bool              `json:"sold"`
	Calls      []redistrace.Call `json:"calls"`
	RoundTrips int               `json:"round_trips"`
	Result     struct {
		Status int             `json:"status"`
		Body   json.RawMessage `json:"body"`
	} `json:"result"`
}

// traceSale asks replica 0 to trace the next sale of stage, makes one, and
// returns the trace.
func traceSale(t *testing.T, r *replicas, stage string) traced {
	t.Helper()
	answer := make(chan response, 1)
	go func() { answer <- r.do(0, http.MethodPost, "/api/stages/"+stage+"/trace?wait=10s", "", r.admin()) }()
	// The trace request arms before the sale only once it is served; sales
	// until then are not traced, and the one after is.
	var res response
	for res.status == 0 {
		r.deduct(0, stage, "")
		select {
		case res = <-answer:
		default:
		}
	}
	if res.status != http.StatusOK {
		t.Fatalf("trace %s: %d %s", stage, res.status, res.body)
	}
	var tr traced
	if err := json.Unmarshal(res.body, &tr); err != nil {
		t.Fatal(err)
	}
	return tr
}

func scripts(tr traced, background bool) []string {
	var names []string
	for _, c := range tr.Calls {
		if c.Script != "" && c.Background == background {
			names = append(names, c.Script)
		}
	}
	return names
}

// TestTraceShowsWhatASaleSends traces real sales of three stages and checks
// the commands each sent: scripts by name, keys, replies, round trips, and
// the watchdog's renewal sent from its own goroutine.
func TestTraceShowsWhatASaleSends(t *testing.T) {
	srv := redistest.Start(t)
	r := startReplicas(t, srv, 1)

	r.reset("atomic", 100, 0)
	tr := traceSale(t, r, "atomic")
	if !tr.Sold || tr.Result.Status != http.StatusOK || !slices.Contains(scripts(tr, false), "atomic_deduct.lua") {
		t.Fatalf("atomic trace: %+v", tr)
	}
	for _, c := range tr.Calls {
		if strings.Contains(strings.Join(c.Args, " "), "redis.call") {
			t.Errorf("a script body in the trace: %+v", c)
		}
	}

	r.reset("naive", 100, 0)
	tr = traceSale(t, r, "naive")
	var commands []string
	for _, c := range tr.Calls {
		commands = append(commands, c.Command)
	}
	if !slices.Contains(commands, "GET") || !slices.Contains(commands, "EXEC") || tr.RoundTrips < 2 {
		t.Errorf("naive trace: commands %v in %d round trips; want a GET, then a MULTI/EXEC", commands, tr.RoundTrips)
	}

	// Work past a third of the lease: the watchdog renews during the sale.
	r.reset("watchdog", 100, 0)
	r.setFaults("watchdog", `{"work":"200ms","lock_ttl":"150ms"}`)
	tr = traceSale(t, r, "watchdog")
	own, background := scripts(tr, false), scripts(tr, true)
	if !slices.Contains(own, "lock.lua") || !slices.ContainsFunc(own, func(s string) bool { return s == "unlock.lua" || s == "release.lua" }) {
		t.Errorf("watchdog trace: scripts %v; want lock.lua and its release", own)
	}
	if !slices.Contains(background, "renew.lua") {
		t.Errorf("watchdog trace: background scripts %v; want the watchdog's renew.lua", background)
	}
	for _, c := range tr.Calls {
		if c.Script == "lock.lua" && (len(c.Keys) == 0 || !strings.HasSuffix(c.Keys[0], ":lock")) {
			t.Errorf("lock.lua's keys %v, want the lock key first", c.Keys)
		}
	}
	t.Logf("watchdog sale: %+v", tr)
}

// TestTraceWithoutSaleAnswersInTime checks a trace request nobody sells
// to ends with its wait, and a bad wait is refused.
func TestTraceWithoutSaleAnswersInTime(t *testing.T) {
	srv := redistest.Start(t)
	r := startReplicas(t, srv, 1)
	if res := r.do(0, http.MethodPost, "/api/stages/atomic/trace?wait=50ms", "", r.admin()); res.status != http.StatusServiceUnavailable || res.code() != "nothing_traced" {
		t.Errorf("trace with no sale: %d %s", res.status, res.body)
	}
	if res := r.do(0, http.MethodPost, "/api/stages/atomic/trace?wait=forever", "", r.admin()); res.status != http.StatusBadRequest {
		t.Errorf("trace wait=forever: %d %s", res.status, res.body)
	}
}
