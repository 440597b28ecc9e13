package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/lockstep/lockstep/internal/launch"
	"github.com/lockstep/lockstep/internal/loadgen/report"
	"github.com/lockstep/lockstep/internal/proc"
	"github.com/lockstep/lockstep/nginx"
)

// Proxy modes of the --proxy flag.
const (
	proxyAuto  = "auto"
	proxyNginx = "nginx"
	proxyGo    = "go"
)

// frontProxy is what the load generator talks to: nginx, or the built-in
// round-robin proxy when nginx is not installed.
type frontProxy struct {
	url       string
	component report.Component
	nginx     *launch.Nginx
	server    *http.Server
	rr        *roundRobin
}

func startProxy(ctx context.Context, mode string, upstreams []string, limit *nginx.Limit, dir string) (*frontProxy, error) {
	bin, lookErr := launch.NginxBinary()
	switch {
	case limit != nil && lookErr != nil:
		return nil, fmt.Errorf("--limiter limit-nginx needs nginx: %w", lookErr)
	case mode == proxyGo:
		return startGoProxy(upstreams, "chosen with --proxy go")
	case mode == proxyAuto && lookErr != nil:
		return startGoProxy(upstreams, "nginx not installed")
	case mode == proxyNginx && lookErr != nil:
		return nil, fmt.Errorf("--proxy nginx: %w", lookErr)
	case mode != proxyAuto && mode != proxyNginx:
		return nil, fmt.Errorf("--proxy %q: want auto, nginx or go", mode)
	}
	return startNginx(ctx, bin, upstreams, limit, dir)
}

// startNginx runs nginx with the project's nginx.conf in a private prefix
// under dir (internal/launch).
func startNginx(ctx context.Context, bin string, upstreams []string, limit *nginx.Limit, dir string) (*frontProxy, error) {
	n, err := launch.StartNginx(ctx, bin, filepath.Join(dir, "nginx"), nginx.Config{Upstreams: upstreams, WorkerProcesses: 1, Limit: limit})
	if err != nil {
		return nil, err
	}
	return &frontProxy{
		url:       n.URL,
		component: report.Component{Kind: "nginx", Version: nginxVersion(bin), Addr: n.URL},
		nginx:     n,
	}, nil
}

// reloadGrace is how long a reloaded nginx's old workers get to finish
// gracefully: the load generator's idle keep-alive connections kept one
// for more than 10 s in a workshop run. Between runs nothing is in
// flight, so nothing is cut.
const reloadGrace = 2 * time.Second

// reload renders nginx.conf with limit (nil: none) and reloads nginx,
// returning once every request meets the new configuration.
func (p *frontProxy) reload(ctx context.Context, limit *nginx.Limit) error {
	cfg := p.nginx.Config
	cfg.Limit = limit
	return p.nginx.Reload(ctx, cfg, reloadGrace)
}

// nginxVersion parses `nginx -v`, which prints "nginx version: nginx/1.22.1"
// on stderr.
func nginxVersion(bin string) string {
	out, err := exec.Command(bin, "-v").CombinedOutput()
	if err != nil {
		return ""
	}
	_, v, _ := strings.Cut(strings.TrimSpace(string(out)), "nginx/")
	return v
}

// startGoProxy serves a round-robin reverse proxy on a free loopback port.
// why ends up in the report next to the proxy's name.
func startGoProxy(upstreams []string, why string) (*frontProxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("go proxy: %w", err)
	}
	rr := &roundRobin{
		upstreams: upstreams,
		transport: &http.Transport{MaxIdleConnsPerHost: 256, IdleConnTimeout: time.Minute},
	}
	srv := &http.Server{Handler: rr, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }() // ends when stop shuts the server down
	url := "http://" + ln.Addr().String()
	return &frontProxy{
		url:       url,
		component: report.Component{Kind: "go round-robin proxy", Note: why + "; runs inside the workshop, so its CPU counts as the loadgen's", Addr: url},
		server:    srv,
		rr:        rr,
	}, nil
}

// roundRobin sends each request to the next upstream, like nginx's
// default. Like nginx's proxy_next_upstream error, a request whose
// connection was refused goes to the next upstream; one that reached an
// upstream is never sent twice.
type roundRobin struct {
	upstreams []string
	transport *http.Transport
	next      atomic.Uint64
}

const maxProxiedBody = 1 << 20

func (rr *roundRobin) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, maxProxiedBody))
	if err != nil {
		http.Error(w, "proxy: read body: "+err.Error(), http.StatusBadRequest)
		return
	}
	var lastErr error
	for range rr.upstreams {
		upstream := rr.upstreams[rr.next.Add(1)%uint64(len(rr.upstreams))]
		out := r.Clone(r.Context())
		out.RequestURI = ""
		out.URL.Scheme, out.URL.Host = "http", upstream
		out.Body = io.NopCloser(bytes.NewReader(body))
		out.ContentLength = int64(len(body))
		forwardedFor(out, r)
		resp, err := rr.transport.RoundTrip(out)
		if err != nil {
			lastErr = err
			var opErr *net.OpError
			if errors.As(err, &opErr) && opErr.Op == "dial" {
				continue
			}
			break
		}
		for k, vs := range resp.Header {
			w.Header()[k] = vs
		}
		w.Header().Set("Server", "lockstep-workshop-proxy")
		w.WriteHeader(resp.StatusCode)
		_, _ = io.Copy(w, resp.Body)
		resp.Body.Close()
		return
	}
	http.Error(w, "proxy: "+lastErr.Error(), http.StatusBadGateway)
}

// forwardedFor appends the client's address to out's X-Forwarded-For, as
// nginx's $proxy_add_x_forwarded_for does: a shop without an admin token
// opens its admin routes to loopback requests only when they carry none.
func forwardedFor(out, in *http.Request) {
	client, _, err := net.SplitHostPort(in.RemoteAddr)
	if err != nil {
		client = in.RemoteAddr
	}
	if prior := in.Header.Values("X-Forwarded-For"); len(prior) > 0 {
		client = strings.Join(prior, ", ") + ", " + client
	}
	out.Header.Set("X-Forwarded-For", client)
}

// pids lists nginx's master and workers (none for the Go proxy).
func (p *frontProxy) pids() []int {
	if p.nginx == nil {
		return nil
	}
	return proc.Group(p.nginx.Pid())
}

func (p *frontProxy) stop() {
	if p.nginx != nil {
		p.nginx.Stop(syscall.SIGQUIT) // nginx's graceful shutdown
	}
	if p.server != nil {
		ctx, cancel := context.WithTimeout(context.Background(), launch.StopGrace)
		defer cancel()
		_ = p.server.Shutdown(ctx)
		p.server.Close()
		p.rr.transport.CloseIdleConnections()
	}
}
