package orderchecker

// The checker (the package doc says what it runs). What it asserts once the
// faults stopped, the shops' resolvers finished and the stream drained:
//
//   - every 200 is exactly one order of its buyer on its rung, live or paid
//     (async: or cancelled by the sweeper when its buyer's payment did not
//     get through);
//   - an Idempotency-Key names one order in all its 200s, and sells at most
//     one (optimistic-mysql's keyed sales each have a buyer of their own,
//     so her orders are the key's);
//   - on the one-per-user rungs at most one live order per buyer, every
//     buyer Redis keeps as a buyer has one, and no buyer was refused
//     already_bought without one, unless a sale of hers with an unknown
//     outcome, or one in flight at the time, explains the refusal;
//   - units sold = units in live orders (the audit's undersold and
//     oversold are 0; async: stock + live + returning = initial), the stream
//     drained — except, on one-per-user-lua and -lock, a unit per unkeyed
//     sale a killed shop had in flight (the documented crash window; keyed
//     ones are sent again until they are finished);
//   - no dead letter (every entry the checker's sales admit is well formed
//     and its buyer's only one, so none can fail on its own account);
//   - every live async order has its payment; a payment answered 200 is
//     paid, one answered order_cancelled cancelled, and nobody pays another
//     buyer's order;
//   - optimistic-mysql's audit counts no duplicate orders beyond those of
//     the buyers the checker named (anonymous sales have no buyer).
//
// The checker's bookkeeping never turns an answer it did not get into a
// sale: a request without an answer, or with one that may not be final
// (5xx, 423, outcome_unknown), is unknown; such a request explains an
// order nobody was answered 200 for, and a refusal of its buyer.

import (
	"cmp"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

var (
	checkerSeed       = flag.Uint64("checker.seed", 0, "the order checker's seed (env ORDER_CHECKER_SEED; 0: a new one)")
	checkerTime       = flag.Duration("checker.time", 0, "how long the order checker sells (env ORDER_CHECKER_TIME; default 30s)")
	checkerBuyers     = flag.Int("checker.buyers", 6, "goroutines of sales")
	checkerHistory    = flag.String("checker.history", "", "a file to write every request, payment and fault of the run to")
	checkerLookAlikes = flag.Bool("checker.lookalikes", true, "eager buyers include look-alikes (case, a trailing space, non-Latin names), and payments are tried by look-alikes")
	checkerFaults     = flag.String("checker.faults", "all", "the faults the order checker injects, comma separated: "+strings.Join(allFaults, ","))
)

const defaultTime = 15 * time.Second

// allFaults are the injector's faults.
var allFaults = []string{
	"redis-cut",     // replies from Redis cut after it ran the command
	"redis-delay",   // Redis's replies held back past the shops' Redis timeout
	"redis-stall",   // requests to Redis held back
	"mysql-cut",     // replies from MariaDB cut after it ran the statement (a COMMIT's too)
	"mysql-delay",   // MariaDB's replies held back past the sale's deadline
	"mysql-stall",   // statements to MariaDB held back past the sale's deadline: they land late
	"mysql-stop",    // MariaDB stopped (SIGSTOP), then continued; meanwhile a worker may crash-loop
	"reset",         // every connection of one link reset
	"redis-restart", // Redis killed (SIGKILL) and started again on its AOF
	"kill-shop",     // a shop killed (SIGKILL), started again a moment later
	"kill-worker",   // an order worker killed (SIGKILL), started again later
	"reset-rung",    // a rung reset while sales go on
}

func faultSet(list string) ([]string, error) {
	if list == "all" {
		return allFaults, nil
	}
	var set []string
	for _, f := range strings.Split(list, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		if !slices.Contains(allFaults, f) {
			return nil, fmt.Errorf("-checker.faults: unknown fault %q (known: %s)", f, strings.Join(allFaults, ","))
		}
		set = append(set, f)
	}
	return set, nil
}

func settings(t *testing.T) (seed uint64, d time.Duration) {
	seed, d = *checkerSeed, *checkerTime
	if v := os.Getenv("ORDER_CHECKER_SEED"); seed == 0 && v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("ORDER_CHECKER_SEED: %v", err)
		}
		seed = n
	}
	if v := os.Getenv("ORDER_CHECKER_TIME"); d == 0 && v != "" {
		n, err := time.ParseDuration(v)
		if err != nil {
			t.Fatalf("ORDER_CHECKER_TIME: %v", err)
		}
		d = n
	}
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	if d == 0 {
		d = defaultTime
	}
	return seed, d
}

func TestOrderChecker(t *testing.T) {
	seed, d := settings(t)
	faults, err := faultSet(*checkerFaults)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("order checker: seed %d, %s of sales, faults %s; again with:\n\tgo test -race -run '^TestOrderChecker$' ./internal/orderchecker/ -checker.seed=%d -checker.time=%s",
		seed, d, strings.Join(faults, ","), seed, d)
	h, vs := runOrderChecker(t, seed, d, faults, "")
	for i, v := range vs {
		if i < maxStories {
			t.Errorf("VIOLATION: %s\n%s", v.what, h.story(v))
		} else {
			t.Errorf("VIOLATION: %s", v.what)
		}
	}
	if len(vs) > 0 {
		t.Errorf("%d violations; seed %d: go test -race -run '^TestOrderChecker$' ./internal/orderchecker/ -checker.seed=%d -checker.time=%s",
			len(vs), seed, seed, d)
	}
}

// runOrderChecker sells for d under faults, with the shops and workers
// built with overlay, and returns the history and what it found.
func runOrderChecker(t *testing.T, seed uint64, d time.Duration, faults []string, overlay string) (*history, []violation) {
	e := startEnv(t, seed, overlay)
	for _, rung := range rungs {
		if err := e.reset(rung); err != nil {
			t.Fatal(err)
		}
	}

	h := &history{start: time.Now(), resets: map[string]time.Duration{}}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	sales := &counter{}
	client := &http.Client{Timeout: saleDeadline + 5*time.Second}
	for i := range max(*checkerBuyers, 1) {
		b := &buyer{id: i, rng: rand.New(rand.NewPCG(seed, uint64(i+1))), h: h, e: e, client: client, sales: sales}
		wg.Go(func() { b.run(stop, seed) })
	}
	e.inject(h, rand.New(rand.NewPCG(seed, 1000)), time.Now().Add(d), faults)
	close(stop)
	wg.Wait()
	h.addFault("sales stopped")
	e.calm()
	h.addFault("keyed sales finished: %d sent again", finishKeyed(h, e, client))
	e.quiesce(h)
	h.addFault("quiescent")

	slices.SortStableFunc(h.att, func(a, b attempt) int { return cmp.Compare(a.Start, b.Start) })
	s, err := e.readState()
	if err != nil {
		t.Fatalf("read the stores: %v", err)
	}
	if *checkerHistory != "" {
		if err := h.write(*checkerHistory); err != nil {
			t.Errorf("-checker.history: %v", err)
		}
	}
	vs := check(h, s)
	summarize(t, h, s)
	if n := len(slices.DeleteFunc(slices.Clone(h.att), func(a attempt) bool { return !h.inCrashWindow(a) })); n > 0 {
		t.Logf("%d unkeyed sales were in flight in a killed shop: as many undersold units are allowed", n)
	}
	return h, vs
}

// reset gives rung its initial stock (and empties its orders).
func (e *env) reset(rung string) error {
	url := e.shopURLs[0] + "/api/stages/" + rung + "/reset"
	body := fmt.Sprintf(`{"sku":%q,"stock":%d}`, sku, initialStock)
	var last error
	for range 5 {
		resp, err := http.Post(url, "application/json", strings.NewReader(body))
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			err = fmt.Errorf("reset %s: %s", rung, resp.Status)
		}
		last = err
		time.Sleep(500 * time.Millisecond)
	}
	return last
}

// inject runs the faults until until, one window at a time, each chosen
// and timed by rng.
func (e *env) inject(h *history, rng *rand.Rand, until time.Time, faults []string) {
	span := func(lo, hi time.Duration) time.Duration { return lo + time.Duration(rng.Int64N(int64(hi-lo)+1)) }
	for n := uint64(1); time.Now().Before(until); n++ {
		time.Sleep(span(200*time.Millisecond, 900*time.Millisecond)) // faults apart, sales in between
		if len(faults) == 0 {
			continue
		}
		f := faults[rng.IntN(len(faults))]
		window := span(500*time.Millisecond, 2*time.Second)
		link := func(l *linkFaults, mode string, p float64, lo, hi time.Duration) {
			h.addFault("%s: %s %.0f%% (%s..%s) for %s", l.name, mode, p*100, lo, hi, window)
			l.set(n, mode, p, p, lo, hi)
			time.Sleep(window)
			h.addFault("%s: %s over, %d chunks", l.name, mode, l.clear())
		}
		switch f {
		case "redis-cut":
			link(e.rfaults, "cut", 0.25, 0, 0)
		case "redis-delay":
			link(e.rfaults, "delay", 0.3, 200*time.Millisecond, 900*time.Millisecond)
		case "redis-stall":
			link(e.rfaults, "stall", 0.3, 200*time.Millisecond, 900*time.Millisecond)
		case "mysql-cut":
			// Meanwhile a worker may crash-loop: each start reads its
			// pending entries again (a delivery more) while their inserts
			// fail; the failures are the link's, not the entries'.
			window = span(time.Second, 6*time.Second)
			restarts, w := rng.IntN(6), e.workers[rng.IntN(len(e.workers))]
			h.addFault("mysql: %s restarted %d times in the cut window", w.name, restarts)
			// A light window lets most transactions through, so that a
			// retry after a lost COMMIT can sell; a heavy one fails most
			// inserts, so that the crash-looping worker's entries pile up
			// deliveries.
			p, pFavour := 0.05, 0.5
			if rng.IntN(2) == 0 {
				p, pFavour = 0.2, 0.9
			}
			e.mfaults.set(n, "cut", p, pFavour, 0, 0)
			h.addFault("mysql: cut %.0f%% (COMMIT and order INSERT %.0f%%) for %s", p*100, pFavour*100, window)
			e.crashLoop(w, restarts, window)
			h.addFault("mysql: cut over, %d chunks", e.mfaults.clear())
		case "mysql-delay":
			link(e.mfaults, "delay", 0.3, time.Second, saleDeadline+500*time.Millisecond)
		case "mysql-stall":
			link(e.mfaults, "stall", 0.4, time.Second, saleDeadline+time.Second)
		case "mysql-stop":
			// Up to 8 s: long enough for the workers' claims to deliver
			// an entry many times while no insert can run.
			window = span(time.Second, 8*time.Second)
			// A worker restarted during the outage reads its pending
			// entries again (one delivery more each time): the outage
			// must not make them dead letters.
			restarts, w := rng.IntN(6), e.workers[rng.IntN(len(e.workers))]
			h.addFault("mariadb: SIGSTOP for %s; %s restarted %d times meanwhile", window, w.name, restarts)
			e.stopMariaDB()
			e.crashLoop(w, restarts, window)
			e.continueMariaDB()
			h.addFault("mariadb: SIGCONT")
		case "reset":
			if rng.IntN(2) == 0 {
				h.addFault("redis link: every connection reset")
				e.rproxy.CutAll()
			} else {
				h.addFault("mysql link: every connection reset")
				e.mproxy.CutAll()
			}
		case "redis-restart":
			h.addFault("redis: SIGKILL, started again on its AOF")
			e.redis.Restart()
			h.addFault("redis: up")
		case "kill-shop":
			i := rng.IntN(len(e.shops))
			h.addFault("shop-%d: SIGKILL, down %s", i+1, window)
			h.kill(i)
			e.shops[i].kill()
			time.Sleep(window)
			if err := e.shops[i].start(); err != nil {
				e.t.Fatal(err)
			}
			if err := waitHealthy(e.shopURLs[i], 30*time.Second); err != nil {
				e.t.Fatalf("shop-%d after its restart: %v", i+1, err)
			}
			h.addFault("shop-%d: up", i+1)
		case "reset-rung":
			rung := resetDuringSales[rng.IntN(len(resetDuringSales))]
			h.addFault("%s: reset to %d units", rung, initialStock)
			if err := e.reset(rung); err != nil {
				h.addFault("%s: reset failed: %v", rung, err)
			}
			h.reset(rung, h.since())
			h.addFault("%s: reset over", rung)
		case "kill-worker":
			i := rng.IntN(len(e.workers))
			h.addFault("worker-%d: SIGKILL, down %s", i+1, window*2)
			e.workers[i].kill()
			time.Sleep(window * 2)
			if err := e.workers[i].start(); err != nil {
				e.t.Fatal(err)
			}
			h.addFault("worker-%d: up", i+1)
		}
	}
}

// crashLoop kills w and starts it again restarts times, evenly over
// window, and returns at its end.
func (e *env) crashLoop(w *proc, restarts int, window time.Duration) {
	for range restarts {
		time.Sleep(window / time.Duration(restarts+1))
		w.kill()
		if err := w.start(); err != nil {
			e.t.Fatal(err)
		}
	}
	time.Sleep(window / time.Duration(restarts+1))
}

// auditJSON is the part of a stage's audit the checker reads.
type auditJSON struct {
	Initial  int64 `json:"initial"`
	Stock    int64 `json:"stock"`
	Sold     int64 `json:"sold"`
	Oversold int64 `json:"oversold"`
	Orders   *struct {
		Orders          int64 `json:"orders"`
		Units           int64 `json:"units"`
		DuplicateOrders int64 `json:"duplicate_orders"`
		Undersold       int64 `json:"undersold"`
		Returning       int64 `json:"returning"`
	} `json:"orders"`
	Stream *struct {
		Length      int64 `json:"stream_length"`
		Undelivered int64 `json:"undelivered"`
		Pending     int64 `json:"pending"`
		DeadLetters int64 `json:"dead_letters"`
	} `json:"stream"`
}

func (e *env) audit(rung string) (auditJSON, error) {
	var a auditJSON
	resp, err := http.Get(e.shopURLs[0] + "/api/stages/" + rung + "/audit?sku=" + sku)
	if err != nil {
		return a, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return a, fmt.Errorf("audit %s: %s", rung, resp.Status)
	}
	return a, json.NewDecoder(resp.Body).Decode(&a)
}

// settled reports whether rung's audit shows nothing in flight: every unit
// gone from the stock in an order (or on its way back), the stream drained.
func (a auditJSON) settled() bool {
	if a.Orders == nil || a.Orders.Undersold != 0 {
		return false
	}
	return a.Stream == nil || a.Stream.Undelivered == 0 && a.Stream.Pending == 0 && a.Orders.Returning == 0
}

// quiesceTimeout bounds the wait for the shops' resolvers, the workers'
// claims and the sweeper: past it the checker judges what it finds.
const quiesceTimeout = 30 * time.Second

// quiesce stops the faults, starts what is down and waits until every
// rung's audit has settled twice in a row, or quiesceTimeout.
func (e *env) quiesce(h *history) {
	e.calm()
	deadline := time.Now().Add(quiesceTimeout)
	calm := 0
	for calm < 2 && time.Now().Before(deadline) {
		time.Sleep(500 * time.Millisecond)
		ok := true
		for _, rung := range rungs {
			a, err := e.audit(rung)
			ok = ok && err == nil && a.settled()
		}
		if ok {
			calm++
		} else {
			calm = 0
		}
	}
	if calm < 2 {
		h.addFault("not settled after %s: judging what there is", quiesceTimeout)
	}
	// A payment window still open ends with a payment or the sweeper.
	time.Sleep(payWithin)
}

// calm stops the faults and starts what is down.
func (e *env) calm() {
	e.rfaults.clear()
	e.mfaults.clear()
	e.continueMariaDB()
	if err := e.revive(); err != nil {
		e.t.Fatalf("start the processes again: %v", err)
	}
}

// row is one order row.
type row struct {
	ID, Stage, User, Status string
	Qty                     int64
}

// state is what the stores hold at the end.
type state struct {
	orders      map[string]row
	payments    map[string]string // order id -> status
	luaBuyers   map[string]string // one-per-user-lua's buyer -> order id
	asyncBuyers []string
	dead        []redis.XMessage
	audits      map[string]auditJSON
}

func (e *env) readState() (state, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s := state{orders: map[string]row{}, payments: map[string]string{}, audits: map[string]auditJSON{}}
	rows, err := e.db.QueryContext(ctx, `SELECT id, stage, user_id, status, qty FROM lockstep_orders WHERE sku = ?`, sku)
	if err != nil {
		return s, err
	}
	for rows.Next() {
		var r row
		if err := rows.Scan(&r.ID, &r.Stage, &r.User, &r.Status, &r.Qty); err != nil {
			rows.Close()
			return s, err
		}
		s.orders[r.ID] = r
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return s, err
	}
	prow, err := e.db.QueryContext(ctx, `SELECT id, status FROM lockstep_payments WHERE sku = ?`, sku)
	if err != nil {
		return s, err
	}
	for prow.Next() {
		var id, status string
		if err := prow.Scan(&id, &status); err != nil {
			prow.Close()
			return s, err
		}
		s.payments[id] = status
	}
	prow.Close()
	if err := prow.Err(); err != nil {
		return s, err
	}
	rdb := redis.NewClient(&redis.Options{Addr: e.redis.Addr})
	defer rdb.Close()
	prefix := func(rung string) string { return "lockstep:" + rung + ":{" + sku + "}:" }
	if s.luaBuyers, err = rdb.HGetAll(ctx, prefix(rungLua)+"buyers").Result(); err != nil {
		return s, err
	}
	if s.asyncBuyers, err = rdb.SMembers(ctx, prefix(rungAsync)+"buyers").Result(); err != nil {
		return s, err
	}
	if s.dead, err = rdb.XRange(ctx, prefix(rungAsync)+"dead", "-", "+").Result(); err != nil {
		return s, err
	}
	for _, rung := range rungs {
		if s.audits[rung], err = e.audit(rung); err != nil {
			return s, err
		}
	}
	return s, nil
}

// violation is one broken promise, with what to print its story by.
type violation struct {
	what  string
	rung  string
	users []string // buyers whose sales tell the story (on rung)
	keys  []string
	sales []int
}

// check compares the answers with the stores.
func check(h *history, s state) []violation {
	var vs []violation
	add := func(v violation) { vs = append(vs, v) }
	live := map[string]map[string][]row{} // rung -> buyer -> live orders
	for _, r := range s.orders {
		if r.Status != "live" {
			continue
		}
		if live[r.Stage] == nil {
			live[r.Stage] = map[string][]row{}
		}
		live[r.Stage][r.User] = append(live[r.Stage][r.User], r)
	}
	pays := map[string][]payment{} // order -> the payments sent for it
	for _, p := range h.pays {
		pays[p.Order] = append(pays[p.Order], p)
	}
	// A sale that started before its rung's last reset ended may belong to
	// the erased round: its answer promises nothing about the stores now.
	current := func(a attempt) bool { return a.Start > h.resets[a.Rung] }
	saleStart := map[int]attempt{}
	for _, a := range h.att {
		if a.Try == 0 {
			saleStart[a.Sale] = a
		}
	}
	paidByBuyer := func(order string, status int) bool {
		return slices.ContainsFunc(pays[order], func(p payment) bool { return p.Own && p.Status == status })
	}

	// Every 200 is one order of its buyer, live (or, async, cancelled for
	// want of a payment that got through).
	seen := map[string]bool{}
	keyOrders := map[string]map[string]bool{}
	for _, a := range h.att {
		if a.Status != http.StatusOK || !current(saleStart[a.Sale]) {
			continue
		}
		if a.Key != "" {
			if keyOrders[a.Key] == nil {
				keyOrders[a.Key] = map[string]bool{}
			}
			keyOrders[a.Key][a.Order] = true
		}
		if seen[a.Order] {
			continue
		}
		seen[a.Order] = true
		v := violation{rung: a.Rung, users: []string{a.User}, keys: nonEmpty(a.Key), sales: []int{a.Sale}}
		r, ok := s.orders[a.Order]
		switch {
		case a.Order == "":
			v.what = fmt.Sprintf("sale %d (%s) answered 200 without an order id", a.Sale, a.Rung)
		case !ok:
			v.what = fmt.Sprintf("sale %d answered 200 with order %s on %s for %q; the order table has no such row", a.Sale, a.Order, a.Rung, a.User)
		case r.Stage != a.Rung || (!a.Anon && r.User != a.User):
			v.what = fmt.Sprintf("sale %d answered 200 with order %s on %s for %q; the row is %s's for %q", a.Sale, a.Order, a.Rung, a.User, r.Stage, r.User)
		case r.Status == "live":
			continue
		case a.Rung == rungAsync && s.payments[a.Order] == "cancelled" && !paidByBuyer(a.Order, http.StatusOK):
			continue // unpaid past its deadline: the sweeper's to cancel
		default:
			v.what = fmt.Sprintf("sale %d answered 200 with order %s on %s for %q; the row is %s (payment %q)", a.Sale, a.Order, a.Rung, a.User, r.Status, s.payments[a.Order])
		}
		add(v)
	}

	// An Idempotency-Key names one order, and sells one.
	for key, ids := range keyOrders {
		if len(ids) > 1 {
			add(violation{what: fmt.Sprintf("Idempotency-Key %s answered 200 with %d different orders %v", key, len(ids), sortedKeys(ids)), keys: []string{key}})
		}
	}
	keyUser := map[string]attempt{}
	for _, a := range h.att {
		if a.Rung == rungOptim && a.Key != "" {
			keyUser[a.Key] = a
		}
	}
	for key, a := range keyUser {
		if n := len(live[rungOptim][a.User]); n > 1 {
			add(violation{what: fmt.Sprintf("Idempotency-Key %s sold %d orders on %s (%s): its buyer %q is the key's alone", key, n, rungOptim, ids(live[rungOptim][a.User]), a.User),
				rung: rungOptim, users: []string{a.User}, keys: []string{key}})
		}
	}

	// One live order per buyer on the one-per-user rungs, and the buyers
	// Redis keeps have theirs.
	for _, rung := range rungs {
		if !onePerUser(rung) {
			continue
		}
		for user, rs := range live[rung] {
			if len(rs) > 1 {
				add(violation{what: fmt.Sprintf("buyer %q has %d live orders on %s: %s", user, len(rs), rung, ids(rs)), rung: rung, users: []string{user}})
			}
		}
	}
	crashed := map[string]int64{}         // rung -> unkeyed sales killed in flight
	crashedBuyers := map[[2]string]bool{} // rung, buyer of such a sale
	for _, a := range h.att {
		if h.inCrashWindow(a) {
			crashed[a.Rung]++
			crashedBuyers[[2]string{a.Rung, a.User}] = true
		}
	}
	for user, id := range s.luaBuyers {
		if len(live[rungLua][user]) == 0 && !crashedBuyers[[2]string{rungLua, user}] {
			add(violation{what: fmt.Sprintf("buyer %q is kept as a buyer of %s (order %s) with no live order: every sale of hers is refused already_bought", user, rungLua, id),
				rung: rungLua, users: []string{user}})
		}
	}
	for _, user := range s.asyncBuyers {
		if user != "" && len(live[rungAsync][user]) == 0 { // "" keeps the set in being (reset.lua)
			add(violation{what: fmt.Sprintf("buyer %q is kept as a buyer of %s with no live order: every sale of hers is refused already_bought", user, rungAsync),
				rung: rungAsync, users: []string{user}})
		}
	}
	byBuyer := map[[2]string][]attempt{}
	for _, a := range h.att {
		byBuyer[[2]string{a.Rung, a.User}] = append(byBuyer[[2]string{a.Rung, a.User}], a)
	}
	refused := map[[2]string]bool{}
	for _, a := range h.att {
		b := [2]string{a.Rung, a.User}
		if a.Code != "already_bought" || !onePerUser(a.Rung) || len(live[a.Rung][a.User]) > 0 || refused[b] || !current(a) {
			continue
		}
		if a.Rung == rungAsync && swept(s, a.User) {
			continue // her order stood then, and was cancelled unpaid since
		}
		explained := slices.ContainsFunc(byBuyer[b], func(o attempt) bool {
			return (o.Sale != a.Sale || o.Try != a.Try) && o.Start < a.End && (o.End > a.Start || !o.definite())
		})
		if !explained {
			refused[b] = true
			add(violation{what: fmt.Sprintf("buyer %q was refused already_bought on %s (sale %d at %.3fs) and has no live order; no sale of hers was in flight or unknown then",
				a.User, a.Rung, a.Sale, a.End.Seconds()), rung: a.Rung, users: []string{a.User}})
		}
	}

	// Units sold = units in live orders; the stream drained.
	for _, rung := range rungs {
		a := s.audits[rung]
		switch {
		case a.Orders == nil:
			add(violation{what: fmt.Sprintf("%s's audit has no orders", rung), rung: rung})
		case a.Orders.Undersold < 0 || a.Orders.Undersold > crashed[rung] || a.Oversold != 0 || a.Stock < 0:
			// At most a unit per unkeyed sale a killed shop had in flight
			// (the documented crash window), never one without a kill.
			add(violation{what: fmt.Sprintf("%s: initial %d, stock %d, %d units in %d live orders, returning %d: undersold %d, oversold %d",
				rung, a.Initial, a.Stock, a.Orders.Units, a.Orders.Orders, a.Orders.Returning, a.Orders.Undersold, a.Oversold),
				rung: rung, users: suspects(h, live, rung)})
		}
		if a.Stream != nil && (a.Stream.Undelivered != 0 || a.Stream.Pending != 0) {
			add(violation{what: fmt.Sprintf("%s's stream is not drained: %d undelivered, %d pending of %d", rung, a.Stream.Undelivered, a.Stream.Pending, a.Stream.Length), rung: rung})
		}
	}
	if a := s.audits[rungOptim]; a.Orders != nil {
		named := int64(0)
		for user, rs := range live[rungOptim] {
			if user != "" {
				named += int64(len(rs) - 1)
			}
		}
		if a.Orders.DuplicateOrders > named {
			add(violation{what: fmt.Sprintf("%s's audit counts %d duplicate orders; the buyers the checker named have %d (anonymous sales have no buyer)", rungOptim, a.Orders.DuplicateOrders, named), rung: rungOptim, users: []string{""}})
		}
	}

	// No dead letters.
	for _, m := range s.dead {
		user := deadUser(m)
		add(violation{what: fmt.Sprintf("dead letter %s: %v", m.ID, m.Values), rung: rungAsync, users: nonEmpty(user)})
	}

	// Payments: every live async order has one; answers match the rows.
	for user, rs := range live[rungAsync] {
		for _, r := range rs {
			if _, ok := s.payments[r.ID]; !ok {
				add(violation{what: fmt.Sprintf("live order %s of %q on %s has no payment: it cannot be paid, nor swept", r.ID, user, rungAsync), rung: rungAsync, users: []string{user}})
			}
		}
	}
	for order, ps := range pays {
		for _, p := range ps {
			if !current(saleStart[p.Sale]) {
				continue
			}
			v := violation{rung: rungAsync, users: []string{p.User}, sales: []int{p.Sale}}
			switch {
			case !p.Own && p.Status == http.StatusOK:
				v.what = fmt.Sprintf("%q paid order %s, another buyer's", p.User, order)
			case p.Own && p.Status == http.StatusOK && (s.payments[order] != "paid" || s.orders[order].Status != "live"):
				v.what = fmt.Sprintf("order %s was answered paid; its payment is %q and its row %q", order, s.payments[order], s.orders[order].Status)
			case p.Own && p.Code == "order_cancelled" && s.payments[order] != "cancelled":
				v.what = fmt.Sprintf("order %s was answered cancelled; its payment is %q", order, s.payments[order])
			default:
				continue
			}
			add(v)
		}
	}
	return vs
}

// suspects are the buyers of rung with a sale whose outcome the checker
// does not know and no live order: where a unit may have gone (at most 10).
func suspects(h *history, live map[string]map[string][]row, rung string) []string {
	var users []string
	for _, a := range h.att {
		if a.Rung == rung && !a.definite() && len(live[rung][a.User]) == 0 && !slices.Contains(users, a.User) && len(users) < 10 {
			users = append(users, a.User)
		}
	}
	return users
}

// swept reports whether user has an async order the sweeper cancelled.
func swept(s state, user string) bool {
	for id, r := range s.orders {
		if r.Stage == rungAsync && r.User == user && s.payments[id] == "cancelled" {
			return true
		}
	}
	return false
}

// deadUser is the buyer of a dead-lettered entry ("" when unreadable):
// its fields keep the entry's one field, order=<id> <qty> <user>\n<replica>.
func deadUser(m redis.XMessage) string {
	for _, v := range m.Values {
		s, ok := v.(string)
		if !ok {
			continue
		}
		if _, packed, found := strings.Cut(s, "order="); found {
			if parts := strings.SplitN(packed, " ", 3); len(parts) == 3 {
				user, _, _ := strings.Cut(parts[2], "\n")
				return user
			}
		}
	}
	return ""
}

func nonEmpty(s string) []string {
	if s == "" {
		return nil
	}
	return []string{s}
}

func sortedKeys(m map[string]bool) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

func ids(rs []row) string {
	s := make([]string, len(rs))
	for i, r := range rs {
		s[i] = r.ID
	}
	sort.Strings(s)
	return strings.Join(s, ",")
}

// maxStories bounds the violations printed with their history, and
// maxStoryLines each history's sales.
const (
	maxStories    = 25
	maxStoryLines = 60
)

// story is a violation's event history: the sales of its buyers and keys,
// their payments, and the faults from a little before the first to a
// little after the last.
func (h *history) story(v violation) string {
	var b strings.Builder
	sales := map[int]bool{}
	for _, s := range v.sales {
		sales[s] = true
	}
	var lines []string
	var near []attempt
	for _, a := range h.att {
		if !(sales[a.Sale] || a.Key != "" && slices.Contains(v.keys, a.Key) || a.Rung == v.rung && slices.Contains(v.users, a.User)) {
			continue
		}
		lines = append(lines, a.String())
		near = append(near, a)
		sales[a.Sale] = true
	}
	if len(lines) > maxStoryLines {
		fmt.Fprintf(&b, "\t(%d earlier requests left out)\n", len(lines)-maxStoryLines)
		lines, near = lines[len(lines)-maxStoryLines:], near[len(near)-maxStoryLines:]
	}
	for _, l := range lines {
		fmt.Fprintf(&b, "\t%s\n", l)
	}
	var prev payment
	for _, p := range h.pays {
		if !sales[p.Sale] {
			continue
		}
		if p.Order == prev.Order && p.User == prev.User && p.Status == prev.Status && p.Status != 0 {
			continue // the same answer again: a payment waiting for its row
		}
		fmt.Fprintf(&b, "\t%s\n", p)
		prev = p
	}
	// The faults from 3 s before to 1 s after each request told; all of
	// them when the story has none (a violation of the stores alone).
	b.WriteString("\tfaults around it:\n")
	for _, f := range h.fault {
		nearby := len(near) == 0 || slices.ContainsFunc(near, func(a attempt) bool {
			return f.At >= a.Start-3*time.Second && f.At <= a.End+time.Second
		})
		if nearby {
			fmt.Fprintf(&b, "\t\t%s\n", f)
		}
	}
	return b.String()
}

// write writes the whole history to path, in time order.
func (h *history) write(path string) error {
	var b strings.Builder
	for _, a := range h.att {
		fmt.Fprintln(&b, a)
	}
	for _, p := range h.pays {
		fmt.Fprintf(&b, "%7.3fs sale %d: %s\n", p.Start.Seconds(), p.Sale, p)
	}
	for _, f := range h.fault {
		fmt.Fprintf(&b, "%s (fault)\n", f)
	}
	return os.WriteFile(path, []byte(b.String()), 0o644)
}

// summarize logs what the run did, per rung.
func summarize(t *testing.T, h *history, s state) {
	type tally struct{ sent, ok, refused, soldOut, unknown, bad int }
	per := map[string]*tally{}
	for _, r := range rungs {
		per[r] = &tally{}
	}
	for _, a := range h.att {
		c := per[a.Rung]
		c.sent++
		switch {
		case a.Status == http.StatusOK:
			c.ok++
		case a.Code == "already_bought":
			c.refused++
		case a.Code == "sold_out":
			c.soldOut++
		case a.Status == http.StatusBadRequest:
			c.bad++
		default:
			c.unknown++
		}
	}
	for _, r := range rungs {
		c, a := per[r], s.audits[r]
		orders := int64(-1)
		if a.Orders != nil {
			orders = a.Orders.Orders
		}
		t.Logf("%-18s requests %4d: 200 %4d, already_bought %4d, sold_out %4d, 400 %3d, other/unknown %4d; stock %d of %d, %d live orders",
			r, c.sent, c.ok, c.refused, c.soldOut, c.bad, c.unknown, a.Stock, a.Initial, orders)
	}
	var fs strings.Builder
	for _, f := range h.fault {
		fmt.Fprintf(&fs, "\n\t%s", f)
	}
	t.Logf("payments sent %d; dead letters %d; faults:%s", len(h.pays), len(s.dead), fs.String())
}
