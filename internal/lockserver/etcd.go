package lockserver

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"time"
)

// Etcd is an etcd cluster on loopback: Debian's etcd-server, one process per
// member, each with its own data directory.
type Etcd struct {
	// Endpoints are the members' client URLs.
	Endpoints []string
	members   []*member
}

// StartEtcd starts a cluster of n members under dir and waits until every
// member is healthy.
// A member that exits first (its port taken meanwhile) has the cluster
// started again on other ports.
func StartEtcd(ctx context.Context, dir string, n int) (*Etcd, error) {
	return retryExited(dir, func(dir string) (*Etcd, error) { return startEtcd(ctx, dir, n) })
}

func startEtcd(ctx context.Context, dir string, n int) (*Etcd, error) {
	bin, err := lookPath("etcd")
	if err != nil {
		return nil, err
	}
	ports, err := freePorts(2 * n)
	if err != nil {
		return nil, err
	}
	peers := make([]string, n)
	for i := range n {
		peers[i] = fmt.Sprintf("m%d=http://%s", i, loopback(ports[n+i]))
	}
	e := &Etcd{}
	for i := range n {
		client, peer := "http://"+loopback(ports[i]), "http://"+loopback(ports[n+i])
		name := fmt.Sprintf("m%d", i)
		m := &member{name: name, bin: bin, logPath: filepath.Join(dir, name+".log"), args: []string{
			"--name", name, "--data-dir", filepath.Join(dir, name),
			"--listen-client-urls", client, "--advertise-client-urls", client,
			"--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
			"--initial-cluster", strings.Join(peers, ","), "--initial-cluster-state", "new",
			"--initial-cluster-token", "lockstep", "--logger", "zap", "--log-outputs", "stderr",
			// Loopback: elections within a second or so instead of etcd's
			// 1 s / 10 s defaults, yet not so eager that a loaded 2-core
			// machine makes the leader flap (50/500 did, under 16 waiters).
			"--heartbeat-interval", "100", "--election-timeout", "1000",
		}}
		e.Endpoints = append(e.Endpoints, client)
		e.members = append(e.members, m)
	}
	if err := startMembers(ctx, "etcd", e.members, func(i int) func(context.Context) error { return healthCheck(e.Endpoints[i]) }); err != nil {
		return nil, err
	}
	return e, nil
}

// healthCheck asks a member's /health, which answers true once the member
// has a leader and can serve.
func healthCheck(endpoint string) func(context.Context) error {
	return func(ctx context.Context) error {
		ctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, endpoint+"/health", nil)
		if err != nil {
			return err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return errors.New("etcd health: " + resp.Status)
		}
		return nil
	}
}

// Pid is member i's process id.
func (e *Etcd) Pid(i int) int { return e.members[i].current().Pid() }

// Kill kills member i with SIGKILL, as a crash would; Restart starts it
// again on its data directory.
func (e *Etcd) Kill(i int) { e.members[i].current().kill() }

// Restart starts a killed member i again and waits until it is healthy.
func (e *Etcd) Restart(ctx context.Context, i int) error {
	m := e.members[i]
	if err := m.start(); err != nil {
		return err
	}
	return m.current().waitUntil(ctx, "etcd "+m.name, healthCheck(e.Endpoints[i]))
}

// Stop kills every member.
func (e *Etcd) Stop() { stopMembers(e.members) }
