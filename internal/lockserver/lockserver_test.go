package lockserver_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockstep/lockstep/internal/lockserver/lockservertest"
)

func TestServersStartAndStop(t *testing.T) {
	t.Run("etcd", func(t *testing.T) {
		e := lockservertest.Etcd(t, 3)
		if len(e.Endpoints) != 3 {
			t.Fatalf("endpoints %v", e.Endpoints)
		}
	})
	t.Run("zookeeper", func(t *testing.T) {
		z := lockservertest.ZooKeeper(t, 3)
		if _, err := z.Leader(t.Context()); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("mariadb", func(t *testing.T) {
		m := lockservertest.MariaDB(t)
		if m.Addr == "" {
			t.Fatal("no address")
		}
	})
}

// ensemble is what the leader-failover scenario does to etcd and ZooKeeper.
type ensemble interface {
	KillLeader(context.Context) (string, error)
	WaitLeader(context.Context) (string, error)
	RestartKilled(context.Context) error
}

// Killing the leader gets another member elected; the killed one rejoins.
func TestLeaderFailover(t *testing.T) {
	for name, start := range map[string]func(t *testing.T) ensemble{
		"etcd":      func(t *testing.T) ensemble { return lockservertest.Etcd(t, 3) },
		"zookeeper": func(t *testing.T) ensemble { return lockservertest.ZooKeeper(t, 3) },
	} {
		t.Run(name, func(t *testing.T) {
			e := start(t)
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
			defer cancel()
			killed, err := e.KillLeader(ctx)
			if err != nil {
				t.Fatal(err)
			}
			begin := time.Now()
			elected, err := e.WaitLeader(ctx)
			if err != nil || elected == killed {
				t.Fatalf("after killing %s: leader %q, %v", killed, elected, err)
			}
			t.Logf("%s killed, %s elected in %v", killed, elected, time.Since(begin))
			if err := e.RestartKilled(ctx); err != nil {
				t.Fatal(err)
			}
			if _, err := e.WaitLeader(ctx); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// A replica has what its master wrote before it was cut off and not what
// came after; promoted, it takes writes.
func TestRedisReplicaCutOffAndPromoted(t *testing.T) {
	master := lockservertest.Redis(t)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	replica, err := master.StartReplica(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(replica.Stop)
	onMaster := redis.NewClient(&redis.Options{Addr: master.Addr})
	defer onMaster.Close()
	onReplica := redis.NewClient(&redis.Options{Addr: replica.Addr})
	defer onReplica.Close()
	if err := onMaster.Set(ctx, "before", "1", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if err := onMaster.Wait(ctx, 1, 5*time.Second).Err(); err != nil {
		t.Fatal(err)
	}
	if err := replica.CutOff(ctx, master); err != nil {
		t.Fatal(err)
	}
	if err := onMaster.Set(ctx, "after", "1", 0).Err(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond) // long enough for a link that was still up to ship it
	master.Stop()
	if err := replica.Promote(ctx); err != nil {
		t.Fatal(err)
	}
	if n := onReplica.Exists(ctx, "before", "after").Val(); n != 1 || onReplica.Exists(ctx, "before").Val() != 1 {
		t.Fatalf("replica has %d of the keys, want only the one written before the cut", n)
	}
	if err := onReplica.Set(ctx, "promoted", "1", 0).Err(); err != nil {
		t.Fatalf("promoted replica refuses a write: %v", err)
	}
}
