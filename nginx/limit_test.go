package nginx

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockstep/lockstep/internal/httpapi"
)

// nginxBin is the installed nginx; with CI=true a missing one fails.
func nginxBin(t *testing.T) string {
	t.Helper()
	bin, err := exec.LookPath("nginx")
	if err != nil {
		bin = "/usr/sbin/nginx"
	}
	if _, err := os.Stat(bin); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("nginx not installed (CI=true: the test command must install it)")
		}
		t.Skip("nginx not installed")
	}
	return bin
}

// startNginx renders c (Listen chosen here) and runs nginx until the test
// ends; it answers nginx's base URL.
func startNginx(t *testing.T, c Config) string {
	t.Helper()
	bin := nginxBin(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c.Listen = ln.Addr().String()
	_ = ln.Close()
	prefix := t.TempDir()
	for _, d := range []string{"logs", "tmp"} {
		if err := os.MkdirAll(filepath.Join(prefix, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	var b strings.Builder
	if err := Render(&b, c); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(prefix, "nginx.conf")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-p", prefix, "-c", path, "-g", "daemon off;")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt) // SIGINT: nginx's fast shutdown, workers included
		_ = cmd.Wait()
	})
	url := "http://" + c.Listen
	for deadline := time.Now().Add(10 * time.Second); ; {
		resp, err := http.Get(url + "/healthz")
		if err == nil {
			_ = resp.Body.Close()
			return url
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(filepath.Join(prefix, "logs", "error.log"))
			t.Fatalf("nginx did not answer: %v\n%s", err, log)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestLimitNginx: limit-nginx is one limiter in front of three replicas:
// a buyer gets its burst through nginx whichever replica serves it, and a
// refusal is the shop's own (429 rate_limited, Retry-After) and never
// reaches a replica.
func TestLimitNginx(t *testing.T) {
	var reached atomic.Int64
	var upstreams []string
	for range 3 {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/api/stages/atomic/deduct" && r.URL.Query().Get("user") == "shop-refuses" {
				w.Header().Set("Retry-After", "7")
				w.WriteHeader(http.StatusTooManyRequests)
				_, _ = io.WriteString(w, `{"error":"rate_limited","message":"the shop's own"}`)
				return
			}
			reached.Add(1)
			_, _ = io.WriteString(w, "{}")
		}))
		t.Cleanup(srv.Close)
		upstreams = append(upstreams, strings.TrimPrefix(srv.URL, "http://"))
	}
	// One request an hour refills nothing during the test: only bursts count.
	base := startNginx(t, Config{Upstreams: upstreams, WorkerProcesses: 2, Limit: &Limit{PerBuyer: 1, BuyerBurst: 5}})
	post := func(path string) (int, http.Header, []byte) {
		t.Helper()
		resp, err := http.Post(base+path, "application/json", nil)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, resp.Header, body
	}
	admitted := func(path string, n int) (ok int, refusal []byte, h http.Header) {
		for range n {
			status, header, body := post(path)
			switch status {
			case http.StatusOK:
				ok++
			case http.StatusTooManyRequests:
				refusal, h = body, header
			default:
				t.Fatalf("%s: %d %s", path, status, body)
			}
		}
		return ok, refusal, h
	}

	before := reached.Load()
	ok, refusal, header := admitted("/api/stages/atomic/deduct?user=bot", 30)
	if ok != 5 || reached.Load()-before != 5 {
		t.Fatalf("bot admitted %d of 30 (%d reached the replicas) through nginx, want its burst of 5 across the 3 replicas", ok, reached.Load()-before)
	}
	var e struct{ Error, Message string }
	if err := json.Unmarshal(refusal, &e); err != nil || e.Error != httpapi.CodeRateLimited {
		t.Fatalf("refusal body %s (%v), want error %q", refusal, err, httpapi.CodeRateLimited)
	}
	if ra := header.Get("Retry-After"); ra != "1" || !strings.HasPrefix(header.Get("Content-Type"), "application/json") {
		t.Fatalf("refusal Retry-After %q, Content-Type %q", ra, header.Get("Content-Type"))
	}
	for _, c := range []struct {
		path string
		want int
	}{
		{"/api/stages/atomic/deduct?user=honest", 5}, // another buyer has its own burst
		{"/api/stages/watchdog/deduct?user=bot", 0},  // one limit per buyer, every stage
		{"/api/stages/atomic/deduct", 5},             // no user: keyed by the address
		{"/api/orders/o-1/pay?user=bot", 30},         // only deducts are limited
	} {
		if ok, _, _ := admitted(c.path, 30); ok != c.want {
			t.Errorf("%s: admitted %d of 30, want %d", c.path, ok, c.want)
		}
	}
	if status, h, body := post("/api/stages/atomic/deduct?user=shop-refuses"); status != http.StatusTooManyRequests || h.Get("Retry-After") != "7" || !strings.Contains(string(body), "the shop's own") {
		t.Errorf("the shop's own 429 came back as %d, Retry-After %q, %s", status, h.Get("Retry-After"), body)
	}
}

// TestLimitNginxGlobal: the global limit counts every buyer.
func TestLimitNginxGlobal(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	t.Cleanup(srv.Close)
	base := startNginx(t, Config{Upstreams: []string{strings.TrimPrefix(srv.URL, "http://")}, WorkerProcesses: 1, Limit: &Limit{Global: 1, GlobalBurst: 10}})
	ok := 0
	for i := range 30 {
		resp, err := http.Post(fmt.Sprintf("%s/api/stages/atomic/deduct?user=b-%d", base, i), "", nil)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			ok++
		}
	}
	if ok != 10 {
		t.Fatalf("30 buyers admitted %d, want the global burst of 10", ok)
	}
}
