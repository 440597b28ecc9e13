package lockserver

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/lockstep/lockstep/internal/sleep"
)

// leaderPoll spaces the looks at an ensemble electing a leader.
const leaderPoll = 20 * time.Millisecond

// KillLeader kills the cluster's leader with SIGKILL and returns its name.
func (e *Etcd) KillLeader(ctx context.Context) (string, error) {
	i, err := e.Leader(ctx)
	if err != nil {
		return "", err
	}
	e.Kill(i)
	return e.members[i].name, nil
}

// Leader is the index of the member the cluster follows.
func (e *Etcd) Leader(ctx context.Context) (int, error) {
	for i := range e.members {
		if e.members[i].current().exited() {
			continue
		}
		st, err := etcdStatus(ctx, e.Endpoints[i])
		if err == nil && st.Leader != "" && st.Leader != "0" && st.Leader == st.Header.MemberID {
			return i, nil
		}
	}
	return 0, fmt.Errorf("etcd: no leader among %v", e.Endpoints)
}

// WaitLeader waits until a running member leads and every running member
// follows it, and returns its name.
func (e *Etcd) WaitLeader(ctx context.Context) (string, error) {
	for {
		if name, ok := e.agreedLeader(ctx); ok {
			return name, nil
		}
		if err := sleep.For(ctx, leaderPoll); err != nil {
			return "", fmt.Errorf("etcd: no new leader: %w", err)
		}
	}
}

func (e *Etcd) agreedLeader(ctx context.Context) (string, bool) {
	var leader, name string
	for i, m := range e.members {
		if m.current().exited() {
			continue
		}
		st, err := etcdStatus(ctx, e.Endpoints[i])
		if err != nil || st.Leader == "" || st.Leader == "0" || leader != "" && st.Leader != leader {
			return "", false
		}
		leader = st.Leader
		if st.Leader == st.Header.MemberID {
			name = m.name
		}
	}
	return name, name != ""
}

// RestartKilled starts every killed member again and waits until each is
// healthy.
func (e *Etcd) RestartKilled(ctx context.Context) error {
	for i, m := range e.members {
		if m.current().exited() {
			if err := e.Restart(ctx, i); err != nil {
				return err
			}
		}
	}
	return nil
}

// etcdStatusReply is what the v3 JSON gateway's maintenance status says
// (member ids as decimal strings).
type etcdStatusReply struct {
	Header struct {
		MemberID string `json:"member_id"`
	} `json:"header"`
	Leader string `json:"leader"`
}

func etcdStatus(ctx context.Context, endpoint string) (etcdStatusReply, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	var st etcdStatusReply
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint+"/v3/maintenance/status", bytes.NewReader([]byte("{}")))
	if err != nil {
		return st, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return st, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return st, fmt.Errorf("etcd status: %s", resp.Status)
	}
	return st, json.NewDecoder(resp.Body).Decode(&st)
}

// KillLeader kills the ensemble's leader with SIGKILL and returns its name.
func (z *ZooKeeper) KillLeader(ctx context.Context) (string, error) {
	i, err := z.Leader(ctx)
	if err != nil {
		return "", err
	}
	z.Kill(i)
	return z.members[i].name, nil
}

// WaitLeader waits until a running member leads and every other running
// member follows, and returns the leader's name.
func (z *ZooKeeper) WaitLeader(ctx context.Context) (string, error) {
	for {
		if name, ok := z.agreedLeader(ctx); ok {
			return name, nil
		}
		if err := sleep.For(ctx, leaderPoll); err != nil {
			return "", fmt.Errorf("zookeeper: no new leader: %w", err)
		}
	}
}

func (z *ZooKeeper) agreedLeader(ctx context.Context) (string, bool) {
	var name string
	for i, m := range z.members {
		if m.current().exited() {
			continue
		}
		mode, err := zkMode(ctx, z.Servers[i])
		switch {
		case err != nil:
			return "", false
		case mode == "leader":
			name = m.name
		case mode != "follower":
			return "", false
		}
	}
	return name, name != ""
}

// RestartKilled starts every killed member again and waits until each
// serves.
func (z *ZooKeeper) RestartKilled(ctx context.Context) error {
	for i, m := range z.members {
		if !m.current().exited() {
			continue
		}
		if err := m.start(); err != nil {
			return err
		}
		if err := m.current().waitUntil(ctx, "zookeeper "+m.name, serving(z.Servers[i])); err != nil {
			return err
		}
	}
	return nil
}
