package faultproxy

import (
	"bufio"
	"bytes"
	"net"
	"testing"
	"time"
)

// cutFirstReply cuts the connection on the first reply to a request that
// contains "run", and delays every other reply by delay.
type cutFirstReply struct {
	cuts  chan struct{}
	delay time.Duration
}

func (p *cutFirstReply) Request([]byte) time.Duration { return 0 }

func (p *cutFirstReply) Reply(_, last []byte) (time.Duration, bool) {
	if bytes.Contains(last, []byte("run")) {
		select {
		case p.cuts <- struct{}{}:
			return 0, true
		default:
		}
	}
	return p.delay, false
}

// echoServer answers every line with "ok <line>" and counts the lines.
func echoServer(t *testing.T, lines chan<- string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer conn.Close()
				r := bufio.NewScanner(conn)
				for r.Scan() {
					lines <- r.Text()
					_, _ = conn.Write([]byte("ok " + r.Text() + "\n"))
				}
			}()
		}
	}()
	return ln.Addr().String()
}

// The server ran the request, and the client lost the reply with its
// connection; the next connection's replies are delayed as the policy says.
func TestReplyCutAfterTheServerRan(t *testing.T) {
	lines := make(chan string, 10)
	policy := &cutFirstReply{cuts: make(chan struct{}, 1), delay: 150 * time.Millisecond}
	p, err := Start(echoServer(t, lines), policy)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()

	conn, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_, _ = conn.Write([]byte("run\n"))
	if got := <-lines; got != "run" {
		t.Fatalf("server got %q", got)
	}
	_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	if n, err := conn.Read(make([]byte, 16)); err == nil {
		t.Fatalf("read %d bytes of a reply that should have been cut", n)
	}

	again, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	start := time.Now()
	_, _ = again.Write([]byte("run\n"))
	reply, err := bufio.NewReader(again).ReadString('\n')
	if err != nil || reply != "ok run\n" {
		t.Fatalf("second reply %q, %v", reply, err)
	}
	if waited := time.Since(start); waited < policy.delay {
		t.Fatalf("reply came after %v, want the policy's delay %v", waited, policy.delay)
	}
}
