// Package outcometest makes, against real servers, the errors of the
// internal/outcome table, so that every copy of the "did it run?" rule —
// outcome.Of, and lock's own, which must not import the shop's packages —
// is tested over the same cases.
package outcometest

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockstep/lockstep/internal/faultproxy"
	"github.com/lockstep/lockstep/internal/outcome"
	"github.com/lockstep/lockstep/internal/redisclient"
	"github.com/lockstep/lockstep/internal/redistest"
)

// Case is one row of the table: the error a call failed with, and what it
// did on its server.
type Case struct {
	Name string
	Err  error
	Want outcome.Outcome
}

// Replies is a faultproxy policy that, for a request containing Marker,
// holds the server's reply back for Delay and then, with Cut, closes the
// connection instead of forwarding it: the server has acted, and the
// client never learns it.
type Replies struct {
	Marker []byte
	Delay  time.Duration
	Cut    bool
}

func (Replies) Request([]byte) time.Duration { return 0 }

func (r Replies) Reply(_, last []byte) (time.Duration, bool) {
	if !bytes.Contains(last, r.Marker) {
		return 0, false
	}
	return r.Delay, r.Cut
}

// Proxy starts a faultproxy to upstream with p, stopped with t.
func Proxy(t testing.TB, upstream string, p faultproxy.Policy) string {
	t.Helper()
	px, err := faultproxy.Start(upstream, p)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(px.Close)
	return px.Addr()
}

// ClosedAddr is a loopback address nothing listens on.
func ClosedAddr(t testing.TB) string {
	return "127.0.0.1:" + strconv.Itoa(redistest.FreePort(t))
}

// Check fails t unless the server's own record agrees with the case: a
// call not sent did not run, and a fault meant to leave a call "may have
// run" did leave it run (so the row shows what it claims).
func Check(t testing.TB, c Case, ran bool) {
	t.Helper()
	if c.Want == outcome.NotSent && ran {
		t.Fatalf("%s: classed not sent, but the server ran it (%v)", c.Name, c.Err)
	}
	if c.Want == outcome.MayHaveRun && !ran {
		t.Fatalf("%s: the fault must leave the call run by the server, to show that %v may have run", c.Name, c.Err)
	}
}

// Redis makes each go-redis row against a redis-server started for t
// (through a faultproxy where the reply must be lost), and against a fake
// server for the refusals a lone server never sends (MOVED, TRYAGAIN...).
func Redis(t *testing.T) []Case {
	srv := redistest.Start(t)
	direct := srv.Client(t)
	ctx := context.Background()
	client := func(addr string, tune func(*redis.Options)) *redis.Client {
		o := redisclient.Options(redisclient.Settings{Timeout: 200 * time.Millisecond}, addr)
		if tune != nil {
			tune(o)
		}
		c := redis.NewClient(o)
		t.Cleanup(func() { _ = c.Close() })
		return c
	}
	var cases []Case
	// add records a SET of key (run by do) and checks the server's record.
	add := func(name string, want outcome.Outcome, key string, do func(key string) error) {
		c := Case{Name: name, Err: do(key), Want: want}
		time.Sleep(300 * time.Millisecond) // a held-back request lands
		n, err := direct.Exists(ctx, key).Result()
		if err != nil {
			t.Fatal(err)
		}
		Check(t, c, n == 1)
		cases = append(cases, c)
	}
	set := func(c *redis.Client, ctx context.Context, key string) error { return c.Set(ctx, key, 1, 0).Err() }

	direct.LPush(ctx, "a-list", 1)
	done, cancel := context.WithCancel(ctx)
	cancel()
	cases = append(cases,
		Case{"answered", set(client(srv.Addr, nil), ctx, "answered"), outcome.Ran},
		Case{"redis.Nil", client(srv.Addr, nil).Get(ctx, "missing").Err(), outcome.Ran},
		Case{"error reply (WRONGTYPE)", client(srv.Addr, nil).Incr(ctx, "a-list").Err(), outcome.Ran},
		Case{"NOSCRIPT", client(srv.Addr, nil).EvalSha(ctx, strings.Repeat("0", 40), nil).Err(), outcome.Refused},
		// Not sent, but the error alone cannot tell it from a deadline
		// reached after the write: classed may have run.
		Case{"context done before the write", set(client(srv.Addr, nil), done, "ctx-before"), outcome.MayHaveRun},
	)
	add("pool timeout", outcome.NotSent, "pool-timeout", func(key string) error {
		c := client(srv.Addr, func(o *redis.Options) { o.PoolSize = 1; o.PoolTimeout = 50 * time.Millisecond; o.ReadTimeout = -1 })
		var held sync.WaitGroup
		defer held.Wait()
		held.Go(func() { _ = c.BLPop(ctx, time.Second, "nothing").Err() }) // holds the one connection
		time.Sleep(100 * time.Millisecond)
		return set(c, ctx, key)
	})
	add("dial refused", outcome.NotSent, "dial", func(key string) error { return set(client(ClosedAddr(t), nil), ctx, key) })
	add("client closed", outcome.NotSent, "closed", func(key string) error {
		c := client(srv.Addr, nil)
		_ = c.Close()
		return set(c, ctx, key)
	})
	add("context deadline after the write", outcome.MayHaveRun, "ctx-after", func(key string) error {
		c := client(Proxy(t, srv.Addr, Replies{Marker: []byte(key), Delay: 200 * time.Millisecond}), func(o *redis.Options) { o.ReadTimeout = 2 * time.Second })
		short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
		defer cancel()
		return set(c, short, key)
	})
	add("read timeout after the server acted", outcome.MayHaveRun, "read-timeout", func(key string) error {
		return set(client(Proxy(t, srv.Addr, Replies{Marker: []byte(key), Delay: 400 * time.Millisecond}), nil), ctx, key)
	})
	add("connection cut after the server acted (EOF)", outcome.MayHaveRun, "cut", func(key string) error {
		return set(client(Proxy(t, srv.Addr, Replies{Marker: []byte(key), Cut: true}), nil), ctx, key)
	})
	for _, reply := range []string{"MOVED 3999 127.0.0.1:6381", "ASK 3999 127.0.0.1:6381", "TRYAGAIN Multiple keys request during rehashing of slot",
		"CLUSTERDOWN The cluster is down", "LOADING Redis is loading the dataset in memory", "READONLY You can't write against a read only replica.",
		"MASTERDOWN Link with MASTER is down", "BUSY Redis is busy running a script", "EXECABORT Transaction discarded", "OOM command not allowed"} {
		c := redis.NewClient(&redis.Options{Addr: refusing(t, reply), Protocol: 2, DisableIdentity: true, MaxRetries: -1})
		name, _, _ := strings.Cut(reply, " ")
		cases = append(cases, Case{name, c.Set(ctx, "k", 1, 0).Err(), outcome.Refused})
		_ = c.Close()
	}
	return cases
}

// refusing is a server that answers every RESP command with -reply.
func refusing(t *testing.T, reply string) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var conns sync.WaitGroup
	t.Cleanup(func() { _ = ln.Close(); conns.Wait() })
	conns.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns.Go(func() {
				defer c.Close()
				r := bufio.NewReader(c)
				for skipCommand(r) == nil {
					if _, err := fmt.Fprintf(c, "-%s\r\n", reply); err != nil {
						return
					}
				}
			})
		}
	})
	return ln.Addr().String()
}

// skipCommand reads one RESP array of bulk strings.
func skipCommand(r *bufio.Reader) error {
	line, err := r.ReadString('\n')
	if err != nil {
		return err
	}
	n, _ := strconv.Atoi(strings.TrimSpace(line[1:]))
	for range 2 * n {
		if _, err := r.ReadString('\n'); err != nil {
			return err
		}
	}
	return nil
}
