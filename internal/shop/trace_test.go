package shop_test

import (
	"encoding/json"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/lockstep/lockstep/internal/redistest"
	"github.com/lockstep/lockstep/internal/redistrace"
	"github.com/lockstep/lockstep/internal/shop"
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
	return traceSaleOf(t, r, stage, "")
}

// traceSaleOf is traceSale with the sales' query (e.g. "?user=u").
func traceSaleOf(t *testing.T, r *replicas, stage, query string) traced {
	t.Helper()
	answer := make(chan response, 1)
	go func() { answer <- r.do(0, http.MethodPost, "/api/stages/"+stage+"/trace?wait=10s", "", r.admin()) }()
	// The trace request arms before the sale only once it is served; sales
	// until then are not traced, and the one after is.
	var res response
	for res.status == 0 {
		r.deduct(0, stage, query)
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

// An order stage's trace shows its SQL beside its Redis commands, each a
// round trip: optimistic-redis's WATCH/MULTI/EXEC then the order INSERT,
// optimistic-mysql's SELECT then its one transaction.
func TestTraceShowsASalesSQL(t *testing.T) {
	dir := t.TempDir()
	r := startReplicas(t, redistest.Start(t), 1, func(c *shop.Config) { c.OrdersSQLite = filepath.Join(dir, "orders.db") })
	for _, tc := range []struct {
		stage string
		want  []string // the calls' commands, and the first SQL statement's start
		sql   string
	}{
		{"optimistic-redis", []string{"WATCH", "EXEC", "SQL sqlite"}, "INSERT INTO lockstep_orders"},
		{"optimistic-mysql", []string{"SQL sqlite"}, "SELECT stock"},
	} {
		r.reset(tc.stage, 100, 0)
		tr := traceSaleOf(t, r, tc.stage, "?user=alice")
		var commands []string
		sql := ""
		for _, c := range tr.Calls {
			commands = append(commands, c.Command)
			if strings.HasPrefix(c.Command, "SQL") && sql == "" && len(c.Args) > 0 {
				sql = c.Args[0]
			}
		}
		for _, w := range tc.want {
			if !slices.Contains(commands, w) {
				t.Errorf("%s trace: commands %v, want %s among them", tc.stage, commands, w)
			}
		}
		if !strings.HasPrefix(sql, tc.sql) || tr.RoundTrips < 2 {
			t.Errorf("%s trace: first SQL %q in %d round trips, want %q first", tc.stage, sql, tr.RoundTrips, tc.sql)
		}
	}
}
