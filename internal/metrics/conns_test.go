package metrics

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/lockstep/lockstep/internal/redistest"
	"github.com/lockstep/lockstep/inventory"
)

// noStages is an Auditor of a shop without stages.
type noStages struct{}

func (noStages) Stages() []inventory.Info                       { return nil }
func (noStages) SKUs(context.Context, string) ([]string, error) { return nil, nil }
func (noStages) Audit(context.Context, string, string) (inventory.Audit, error) {
	return inventory.Audit{}, nil
}

// value is the unlabelled gauge name's value at a scrape.
func value(t *testing.T, m *Metrics, name string) float64 {
	t.Helper()
	mfs, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatalf("no %s", name)
	return 0
}

// An open keep-alive connection counts until the client closes it.
func TestHTTPConns(t *testing.T) {
	m := New(noStages{}, nil)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	srv.Config.ConnState = m.HTTPConns()
	srv.Start()
	defer srv.Close()
	client := srv.Client()
	res, err := client.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if n := value(t, m, "lockstep_http_open_conns"); n != 1 {
		t.Errorf("%v open after a keep-alive request, want 1", n)
	}
	client.CloseIdleConnections()
	srv.Close() // waits until the server has seen every connection close
	if n := value(t, m, "lockstep_http_open_conns"); n != 0 {
		t.Errorf("%v open after the client closed it, want 0", n)
	}
}

// A pool keeps the connections its highest concurrency opened, idle once
// the commands are done; one taken out and not given back is not idle.
func TestRedisPools(t *testing.T) {
	rdb := redistest.Start(t).Client(t)
	m := New(noStages{}, nil)
	m.RedisPools([]redis.UniversalClient{rdb})
	ctx := context.Background()
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() { rdb.Do(ctx, "DEBUG", "SLEEP", "0.05") })
	}
	wg.Wait()
	held := rdb.Conn()
	defer held.Close()
	if err := held.Ping(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	conns := value(t, m, "lockstep_redis_pool_conns")
	idle := value(t, m, "lockstep_redis_pool_idle_conns")
	if conns < 2 || idle != conns-1 {
		t.Errorf("%v connections, %v idle; want several (8 commands ran at once), all idle but the one held", conns, idle)
	}
}
