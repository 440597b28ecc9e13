package orderchecker

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"
)

const sku = "sku-1"

// The checked rungs: the order rungs documented as right.
const (
	rungLua   = "one-per-user-lua"
	rungLock  = "one-per-user-lock"
	rungOptim = "optimistic-mysql"
	rungAsync = "async-stream"
)

var rungs = []string{rungLua, rungLock, rungOptim, rungAsync}

// resetDuringSales are the rungs the reset-rung fault resets while sales
// go on: every rung, as each reset fences a round in both stores
// (orders/doc.go, "Resets"; asyncorders/doc.go, "Rounds").
var resetDuringSales = rungs

// onePerUser reports whether rung keeps each buyer to one order.
func onePerUser(rung string) bool { return rung != rungOptim }

// initialStock is each rung's stock, and buyerPool the buyers drawn besides
// the eager ones: enough that a default run sells on every rung to its
// end; a longer run sells out, and its sales then meet sold_out.
const (
	initialStock = 500
	buyerPool    = 1000
)

// eagerBuyers come back again and again, alone and several at once. Some
// differ only by case, a trailing space or their script: one buyer identity
// everywhere means each is a buyer of her own in every store.
var eagerBuyers = []string{"ann", "ann ", "ANN", "张三", "bob", "Bob", "eve", "zoë"}

// plainBuyers are eager buyers without look-alikes (-checker.lookalikes=false:
// a run that leaves the buyer-identity defects out of its findings).
var plainBuyers = []string{"ann", "bob", "eve", "kim"}

// attempt is one HTTP request of a sale and what came back.
type attempt struct {
	Sale    int    // the logical sale: one request, or a keyed request and its retries
	Try     int    // 0 for the first
	Rung    string // stage
	User    string
	Anon    bool // sent without a user (optimistic-mysql only)
	Key     string
	Shop    int
	Start   time.Duration // since the run began
	End     time.Duration
	Status  int    // 0: no answer (transport error)
	Code    string // the error code of a non-200 answer
	Order   string // the order id of a 200
	Err     string // transport error, or the error message
	Refused bool   // connection refused: the request was never sent
	Replay  bool   // Idempotent-Replayed
}

// payment is one pay request of an async order.
type payment struct {
	Sale   int
	Order  string
	User   string // who paid: the buyer, or a look-alike probing another's order
	Own    bool
	Start  time.Duration
	Status int
	Code   string
	Err    string
}

// definite reports whether the answer says for sure what the request did:
// 200 sold; sold_out, already_bought and bad_request sold nothing. Every
// other answer (a 5xx, 423, outcome_unknown, no answer) may have sold. A
// refused connection too: net/http sends a request with an
// Idempotency-Key again on a new connection when its kept-alive one broke,
// so the refusal may follow a first send the shop ran before it died.
func (a attempt) definite() bool {
	switch {
	case a.Status == http.StatusOK || a.Status == http.StatusBadRequest:
		return true
	case a.Status == http.StatusConflict:
		return a.Code == "sold_out" || a.Code == "already_bought"
	}
	return false
}

func (a attempt) String() string {
	s := fmt.Sprintf("%7.3fs..%7.3fs sale %d try %d %s user=%q", a.Start.Seconds(), a.End.Seconds(), a.Sale, a.Try, a.Rung, a.User)
	if a.Anon {
		s += " (anonymous)"
	}
	if a.Key != "" {
		s += " key=" + a.Key
	}
	s += fmt.Sprintf(" shop-%d -> ", a.Shop+1)
	switch {
	case a.Refused:
		s += "connection refused"
	case a.Status == 0:
		s += "no answer: " + a.Err
	case a.Status == http.StatusOK:
		s += "200 order " + a.Order
		if a.Replay {
			s += " (replayed)"
		}
	default:
		s += fmt.Sprintf("%d %s: %s", a.Status, a.Code, a.Err)
	}
	return s
}

func (p payment) String() string {
	who := "buyer"
	if !p.Own {
		who = "look-alike"
	}
	s := fmt.Sprintf("%7.3fs pay order %s as %s %q -> ", p.Start.Seconds(), p.Order, who, p.User)
	if p.Status == 0 {
		return s + "no answer: " + p.Err
	}
	return s + fmt.Sprintf("%d %s", p.Status, p.Code)
}

// history is what every buyer saw, and what the injector did, with times.
type history struct {
	start time.Time
	mu    sync.Mutex
	att   []attempt
	pays  []payment
	fault []fault
	// resets are when each rung's last reset during the run ended: a sale
	// that started before may belong to the round the reset erased.
	resets map[string]time.Duration
	// kills are the shops killed (kill-shop), and when.
	kills []kill
}

// kill is one kill-shop: shop killed at at.
type kill struct {
	shop int
	at   time.Duration
}

func (h *history) kill(shop int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.kills = append(h.kills, kill{shop: shop, at: h.since()})
}

// inCrashWindow reports whether a was on its way in a shop when the
// checker killed it: sent before the kill, never answered. An unkeyed such
// sale of a rung that deducts in Redis before its insert may have died in
// the window docs/orders.md documents, leaving its unit (and, on
// one-per-user-lua, its buyer) without an order; a keyed one is finished
// by finishKeyed.
func (h *history) inCrashWindow(a attempt) bool {
	return a.Key == "" && a.Status == 0 && (a.Rung == rungLua || a.Rung == rungLock) &&
		slices.ContainsFunc(h.kills, func(k kill) bool { return k.shop == a.Shop && a.Start < k.at && a.End >= k.at })
}

func (h *history) reset(rung string, end time.Duration) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.resets[rung] = end
}

// fault is one step of the injector.
type fault struct {
	At   time.Duration
	What string
}

func (f fault) String() string { return fmt.Sprintf("%7.3fs %s", f.At.Seconds(), f.What) }

func (h *history) since() time.Duration { return time.Since(h.start) }

func (h *history) add(a attempt) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.att = append(h.att, a)
}

func (h *history) addPay(p payment) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.pays = append(h.pays, p)
}

func (h *history) addFault(format string, args ...any) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.fault = append(h.fault, fault{At: h.since(), What: fmt.Sprintf(format, args...)})
}

// buyer is one goroutine of sales. Its choices come from its own seeded
// source; which shop is up when it sends is the injector's and the
// scheduler's.
type buyer struct {
	id     int
	rng    *rand.Rand
	h      *history
	e      *env
	client *http.Client
	sales  *counter
}

type counter struct {
	mu sync.Mutex
	n  int
}

func (c *counter) next() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n++
	return c.n
}

// resumesKeyed are the rungs whose keyed sales a request sent again with
// the key finishes (inventory.ResumesKeyedSales).
var resumesKeyed = []string{rungLua, rungLock, rungOptim}

// finishKeyedTimeout bounds finishKeyed: past the lock rung's buyer locks
// that killed shops left (the watchdog's 30 s lease).
const finishKeyedTimeout = 45 * time.Second

// finishKeyed sends every keyed sale of the rungs that resume keyed sales
// whose last answer was not definite again with its key, as its buyer
// would, until it is: a sale a killed shop left between the Redis
// deduction and the insert is then finished (its order is the key's), and
// the checker judges the rest as for any other request. It returns how
// many sales it sent again.
func finishKeyed(h *history, e *env, client *http.Client) int {
	last := map[int]attempt{}
	for _, a := range h.att {
		if a.Key != "" && slices.Contains(resumesKeyed, a.Rung) && a.Try >= last[a.Sale].Try {
			last[a.Sale] = a
		}
	}
	b := &buyer{h: h, e: e, client: client}
	deadline := time.Now().Add(finishKeyedTimeout)
	var wg sync.WaitGroup
	n := 0
	for _, a := range last {
		if a.definite() {
			continue
		}
		n++
		wg.Go(func() {
			for try := a.Try + 1; time.Now().Before(deadline); try++ {
				a = b.send(a.Sale, try, a.Rung, a.User, a.Anon, a.Key, (a.Shop+1)%len(e.shops))
				b.h.add(a)
				if a.definite() {
					return
				}
				time.Sleep(time.Second)
			}
		})
	}
	wg.Wait()
	return n
}

// run sells until stop closes.
func (b *buyer) run(stop <-chan struct{}, seed uint64) {
	for {
		select {
		case <-stop:
			return
		default:
		}
		rung := rungs[b.rng.IntN(len(rungs))]
		user, anon := b.pickUser(rung)
		keyed := b.rng.IntN(2) == 0
		eager := onePerUser(rung) && b.rng.IntN(6) == 0
		n := 1
		if eager {
			n = 2 + b.rng.IntN(3) // the same buyer several times at once
		}
		var wg sync.WaitGroup
		for range n {
			sale := b.sales.next()
			key := ""
			if keyed {
				key = fmt.Sprintf("ock-%d-%d", seed, sale)
			}
			if rung == rungOptim && keyed {
				// A buyer of her own per key: her orders are the key's.
				user, anon = fmt.Sprintf("k%d", sale), false
			}
			retries := b.rng.IntN(4)
			shop := b.rng.IntN(len(b.e.shops))
			pay := b.rng.IntN(10) < 7
			probe := b.rng.IntN(5) == 0
			pause := time.Duration(50+b.rng.IntN(400)) * time.Millisecond
			wg.Go(func() { b.sale(sale, rung, user, anon, key, shop, retries, pause, pay, probe) })
		}
		wg.Wait()
		time.Sleep(time.Duration(b.rng.IntN(30)) * time.Millisecond)
	}
}

func (b *buyer) pickUser(rung string) (string, bool) {
	switch {
	case rung == rungOptim && b.rng.IntN(8) == 0:
		return "", true
	case b.rng.IntN(4) == 0:
		if !*checkerLookAlikes {
			return plainBuyers[b.rng.IntN(len(plainBuyers))], false
		}
		return eagerBuyers[b.rng.IntN(len(eagerBuyers))], false
	}
	return fmt.Sprintf("b%d", b.rng.IntN(buyerPool)), false
}

// sale sends one sale, and again with the same key after an answer that
// may not be final.
func (b *buyer) sale(sale int, rung, user string, anon bool, key string, shop, retries int, pause time.Duration, pay, probe bool) {
	for try := 0; ; try++ {
		a := b.send(sale, try, rung, user, anon, key, (shop+try)%len(b.e.shops))
		b.h.add(a)
		if a.Status == http.StatusOK && rung == rungAsync && pay {
			b.pay(sale, a.Order, user, probe, a.Shop)
		}
		if key == "" || a.definite() || try >= retries {
			return
		}
		time.Sleep(pause)
	}
}

func (b *buyer) send(sale, try int, rung, user string, anon bool, key string, shop int) attempt {
	q := url.Values{"sku": {sku}, "qty": {"1"}}
	if !anon {
		q.Set("user", user)
	}
	a := attempt{Sale: sale, Try: try, Rung: rung, User: user, Anon: anon, Key: key, Shop: shop, Start: b.h.since()}
	req, _ := http.NewRequest(http.MethodPost, b.e.shopURLs[shop]+"/api/stages/"+rung+"/deduct?"+q.Encode(), nil)
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	resp, err := b.client.Do(req)
	a.End = b.h.since()
	if err != nil {
		a.Err = err.Error()
		a.Refused = errors.Is(err, syscall.ECONNREFUSED)
		return a
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	a.End = b.h.since()
	if err != nil {
		a.Err = "read answer: " + err.Error()
		return a
	}
	var v struct {
		Order   string `json:"order"`
		Error   string `json:"error"`
		Message string `json:"message"`
	}
	if err := json.Unmarshal(body, &v); err != nil {
		a.Err = "decode answer: " + err.Error()
		return a
	}
	a.Status, a.Order, a.Code, a.Err = resp.StatusCode, v.Order, v.Error, v.Message
	a.Replay = resp.Header.Get("Idempotent-Replayed") == "true"
	return a
}

// pay pays an async order as its buyer, first (probe) as a look-alike who
// must not be able to; 404 while the worker has not inserted it yet.
func (b *buyer) pay(sale int, order, user string, probe bool, shop int) {
	if probe && *checkerLookAlikes {
		if other := lookAlike(user); other != "" {
			b.h.addPay(b.payOnce(sale, order, other, false, shop))
		}
	}
	for i := range 20 {
		p := b.payOnce(sale, order, user, true, (shop+i)%len(b.e.shops))
		b.h.addPay(p)
		if p.Status != http.StatusNotFound && p.Status != 0 && p.Status < 500 {
			return
		}
		time.Sleep(150 * time.Millisecond)
	}
}

// lookAlike is another buyer's name that one store or another may take for
// user's ("" when there is none).
func lookAlike(user string) string {
	switch {
	case strings.HasSuffix(user, " "):
		return strings.TrimRight(user, " ")
	case strings.ToUpper(user) != user:
		return strings.ToUpper(user)
	case strings.ToLower(user) != user:
		return strings.ToLower(user)
	}
	return user + " "
}

func (b *buyer) payOnce(sale int, order, user string, own bool, shop int) payment {
	p := payment{Sale: sale, Order: order, User: user, Own: own, Start: b.h.since()}
	resp, err := b.client.Post(b.e.shopURLs[shop]+"/api/orders/"+url.PathEscape(order)+"/pay?"+url.Values{"user": {user}}.Encode(), "", nil)
	if err != nil {
		p.Err = err.Error()
		return p
	}
	defer resp.Body.Close()
	var v struct {
		Error string `json:"error"`
	}
	body, _ := io.ReadAll(resp.Body)
	_ = json.Unmarshal(body, &v)
	p.Status, p.Code = resp.StatusCode, v.Error
	return p
}
