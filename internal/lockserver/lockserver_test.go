package lockserver_test

import (
	"testing"

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
