package shop_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/lockstep/lockstep/internal/redistest"
	"github.com/lockstep/lockstep/internal/shop"
	"github.com/lockstep/lockstep/inventory"
	"github.com/redis/go-redis/v9"
)

// replicas is a set of in-process shops, each with its own http.Server and
// process-local state, sharing one Redis: what nginx in front of several
// shop processes looks like to Redis.
type replicas struct {
	t      testing.TB
	redis  *redistest.Server
	shops  []*shop.Shop
	urls   []string
	token  string
	http   *http.Client
	exitMu sync.Mutex
	exits  []int
}

type replicaOption func(*shop.Config)

// withCrashClosing makes a replica's injected exit close its inventory, so
// its lock clients stop renewing without unlocking: in process, what kill -9
// does to the locks a replica holds.
func withCrashClosing(r **replicas) replicaOption {
	return func(c *shop.Config) {
		record, name := c.Exit, c.Replica
		c.Exit = func(code int) {
			record(code)
			for i, s := range (*r).shops {
				if fmt.Sprintf("r%d", i) == name {
					_ = s.Inventory.Close()
				}
			}
		}
	}
}

func withAdminToken(tok string) replicaOption {
	return func(c *shop.Config) { c.AdminToken = tok }
}

func withRedisTimeout(d time.Duration) replicaOption {
	return func(c *shop.Config) { c.RedisTimeout = d }
}

// onCluster puts the replicas on a Redis Cluster instead of srv (nil then).
func onCluster(c *redistest.Cluster) replicaOption {
	return func(cfg *shop.Config) { cfg.RedisAddrs, cfg.RedisCluster = nil, c.Addrs() }
}

func startReplicas(t testing.TB, srv *redistest.Server, n int, opts ...replicaOption) *replicas {
	t.Helper()
	r := &replicas{t: t, redis: srv, http: &http.Client{
		Timeout:   15 * time.Second,
		Transport: &http.Transport{MaxIdleConnsPerHost: 128, MaxConnsPerHost: 128},
	}}
	t.Cleanup(r.http.CloseIdleConnections)
	for i := range n {
		cfg := shop.Config{
			Replica:  fmt.Sprintf("r%d", i),
			LockWait: 2 * time.Second,
			Logger:   slog.New(slog.NewTextHandler(io.Discard, nil)),
			Exit: func(code int) {
				r.exitMu.Lock()
				defer r.exitMu.Unlock()
				r.exits = append(r.exits, code)
			},
		}
		if srv != nil {
			cfg.RedisAddrs = []string{srv.Addr}
		}
		for _, o := range opts {
			o(&cfg)
		}
		r.token = cfg.AdminToken
		s, err := shop.New(cfg)
		if err != nil {
			t.Fatalf("shop %d: %v", i, err)
		}
		ts := httptest.NewServer(s.Handler())
		t.Cleanup(func() {
			ts.Close()
			if err := s.Close(); err != nil {
				t.Logf("close shop %d: %v", i, err)
			}
		})
		r.shops = append(r.shops, s)
		r.urls = append(r.urls, ts.URL)
	}
	return r
}

// response is one HTTP answer, decoded.
type response struct {
	status  int
	header  http.Header
	body    []byte
	elapsed time.Duration
}

func (r response) field(name string) any {
	var m map[string]any
	_ = json.Unmarshal(r.body, &m)
	return m[name]
}

func (r response) code() string {
	s, _ := r.field("error").(string)
	return s
}

// do sends one request to replica i.
func (r *replicas) do(i int, method, path string, body string, header map[string]string) response {
	r.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = bytes.NewBufferString(body)
	}
	req, err := http.NewRequest(method, r.urls[i%len(r.urls)]+path, rd)
	if err != nil {
		r.t.Fatalf("request: %v", err)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	start := time.Now()
	res, err := r.http.Do(req)
	if err != nil {
		r.t.Errorf("%s %s: %v", method, path, err)
		return response{}
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return response{status: res.StatusCode, header: res.Header, body: b, elapsed: time.Since(start)}
}

func (r *replicas) admin() map[string]string {
	if r.token == "" {
		return nil
	}
	return map[string]string{"Authorization": "Bearer " + r.token}
}

func (r *replicas) deduct(i int, stage, query string) response {
	r.t.Helper()
	return r.do(i, http.MethodPost, "/api/stages/"+stage+"/deduct"+query, "", nil)
}

func (r *replicas) reset(stage string, stock int64, segments int) {
	r.t.Helper()
	body := fmt.Sprintf(`{"sku":"sku-1","stock":%d,"segments":%d}`, stock, segments)
	if res := r.do(0, http.MethodPost, "/api/stages/"+stage+"/reset", body, r.admin()); res.status != http.StatusOK {
		r.t.Fatalf("reset %s: %d %s", stage, res.status, res.body)
	}
}

// setFaults sets a stage's faults through replica 0 and waits until every
// replica follows them.
func (r *replicas) setFaults(stage, body string) {
	r.t.Helper()
	res := r.do(0, http.MethodPut, "/api/stages/"+stage+"/faults", body, r.admin())
	if res.status != http.StatusOK {
		r.t.Fatalf("faults %s: %d %s", stage, res.status, res.body)
	}
	var want inventory.Faults
	if err := json.Unmarshal([]byte(body), &want); err != nil {
		r.t.Fatalf("faults body: %v", err)
	}
	deadline := time.Now().Add(3 * time.Second)
	for i, s := range r.shops {
		for {
			got, err := s.Inventory.Faults(stage)
			if err == nil && reflect.DeepEqual(got, want) {
				break
			}
			if time.Now().After(deadline) {
				r.t.Fatalf("replica %d runs %s with faults %+v, want %+v", i, stage, got, want)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
}

type auditResult struct {
	inventory.Audit
	Stage string `json:"stage"`
	SKU   string `json:"sku"`
}

func (r *replicas) audit(stage string) auditResult {
	r.t.Helper()
	res := r.do(0, http.MethodGet, "/api/stages/"+stage+"/audit", "", nil)
	if res.status != http.StatusOK {
		r.t.Fatalf("audit %s: %d %s", stage, res.status, res.body)
	}
	var a auditResult
	if err := json.Unmarshal(res.body, &a); err != nil {
		r.t.Fatalf("audit %s: %v: %s", stage, err, res.body)
	}
	return a
}

// tally counts the answers of a load run.
type tally struct {
	mu     sync.Mutex
	status map[int]int
	other  []string
}

func (t *tally) add(res response) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.status == nil {
		t.status = make(map[int]int)
	}
	t.status[res.status]++
	if res.status != http.StatusOK && res.status != http.StatusConflict && res.status != http.StatusLocked && len(t.other) < 5 {
		t.other = append(t.other, fmt.Sprintf("%d %s", res.status, res.body))
	}
}

func (t *tally) get(status int) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.status[status]
}

// hammer runs clients concurrent clients against the replicas (client k on
// replica k mod n), each selling until it is told sold out, its context
// ends, or it fails otherwise; a busy answer makes it pause busyPause.
func (r *replicas) hammer(ctx context.Context, stage string, clients int, busyPause time.Duration) *tally {
	var (
		t  tally
		wg sync.WaitGroup
	)
	for k := range clients {
		wg.Go(func() {
			for ctx.Err() == nil {
				res := r.deduct(k, stage, "")
				t.add(res)
				switch res.status {
				case http.StatusOK:
				case http.StatusLocked:
					time.Sleep(busyPause)
				default:
					return
				}
			}
		})
	}
	wg.Wait()
	return &t
}

// quietRedis drops go-redis's own log lines (a dial refused per attempt
// while a test has Redis stopped); the tests assert on answers instead.
type quietRedis struct{}

func (quietRedis) Printf(context.Context, string, ...any) {}

func TestMain(m *testing.M) {
	redis.SetLogger(quietRedis{})
	os.Exit(m.Run())
}
