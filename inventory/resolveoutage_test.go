package inventory_test

import (
	"context"
	"database/sql"
	"errors"
	"flag"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lockstep/lockstep/internal/lockserver/lockservertest"
	"github.com/lockstep/lockstep/internal/redistest"
	"github.com/lockstep/lockstep/inventory"
)

// outage is how long each phase of TestAMySQLOutageUnderLoadStaysBounded
// lasts: short in the suite, 60s by hand (-mysql-outage 60s).
var outage = flag.Duration("mysql-outage", 2*time.Second, "how long each MySQL outage of the resolver test lasts")

// goroutineSlack is what a replica may add in goroutines during an outage,
// whatever its length and load: database/sql's and the driver's own, and
// one sweep per server.
const goroutineSlack = 30

// A MySQL outage under load leaves the mysql stage's background work
// bounded: a sale whose INSERT was never sent (connection refused) queues
// nothing, and sales whose INSERT may have run (reply lost) are swept by
// one goroutine, one DELETE for all their rows; once MySQL is back they
// are gone and the stage sells (issue 34, defect 6: each failed sale
// started its own goroutine retrying a DELETE a second, 12 → 112
// goroutines after 100 sales).
func TestAMySQLOutageUnderLoadStaysBounded(t *testing.T) {
	m := lockservertest.MariaDB(t)
	root, err := sql.Open("mysql", m.DSN(""))
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	if _, err := root.Exec("CREATE DATABASE IF NOT EXISTS lockstep"); err != nil {
		t.Fatal(err)
	}
	link := lockservertest.StartLink(t, m.Addr)
	// One SKU per buyer: no sale waits for another's row.
	const skus = 50
	inv := replicasOnRedis(t, redistest.Start(t), 1, func(c *inventory.Config) {
		// One round trip per INSERT, and a connection kept per buyer: when
		// the replies are lost, each INSERT runs.
		db, err := sql.Open("mysql", strings.Replace(m.DSN("lockstep"), m.Addr, link.Addr(), 1)+"&interpolateParams=true")
		if err != nil {
			t.Fatal(err)
		}
		db.SetMaxIdleConns(2 * skus)
		t.Cleanup(func() { _ = db.Close() })
		c.MySQL = db
	})[0]
	ctx := context.Background()
	for i := range skus {
		if err := inv.Reset(ctx, "mysql", sku(i), 1000, 0); err != nil {
			t.Fatal(err)
		}
	}
	before := settledGoroutines() // no connection open yet
	var warm sync.WaitGroup
	for i := range skus { // a connection per buyer
		warm.Go(func() {
			if _, err := inv.Deduct(ctx, "mysql", sku(i), 1); err != nil {
				t.Error(err)
			}
		})
	}
	warm.Wait()
	load := func(phase string) (sales int) {
		stop := time.Now().Add(*outage)
		var wg sync.WaitGroup
		var mu sync.Mutex
		for i := range skus {
			wg.Go(func() {
				for time.Now().Before(stop) {
					saleCtx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
					_, err := inv.Deduct(saleCtx, "mysql", sku(i), 1)
					cancel()
					if err == nil || !errors.Is(err, inventory.ErrMySQLUnavailable) && !errors.Is(err, inventory.ErrLockBusy) {
						t.Errorf("%s: sale %v, want mysql unavailable", phase, err)
						return
					}
					mu.Lock()
					sales++
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		after := settledGoroutines() // MySQL still out: what the failed sales left waits
		t.Logf("%s: %d failed sales over %v, goroutines %d before, %d after", phase, sales, *outage, before, after)
		if after > before+goroutineSlack {
			t.Errorf("%s: %d goroutines after %d failed sales, %d before: the background work grows with the outage", phase, after, sales, before)
		}
		return sales
	}
	link.DropReplies() // every INSERT runs, its reply is lost
	load("replies lost")
	var left int
	if err := root.QueryRow("SELECT COUNT(*) FROM lockstep.lockstep_locks").Scan(&left); err != nil {
		t.Fatal(err)
	}
	if left == 0 {
		t.Fatal("no INSERT whose reply was lost ran: the phase tested nothing")
	}
	t.Logf("the lost replies left %d lock rows", left)
	link.Cut() // connections refused: no INSERT sent
	load("connection refused")
	link.Restore()
	back := time.Now()
	for {
		var rows int
		if err := root.QueryRow("SELECT COUNT(*) FROM lockstep.lockstep_locks").Scan(&rows); err != nil {
			t.Fatal(err)
		}
		if rows == 0 {
			break
		}
		if time.Since(back) > sellsAgainWithin+5*time.Second {
			t.Fatalf("%d lock rows left %v after MySQL came back", rows, time.Since(back).Round(time.Millisecond))
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("every row the outage left was deleted %v after MySQL came back", time.Since(back).Round(time.Millisecond))
	if _, err := inv.Deduct(ctx, "mysql", sku(1), 1); err != nil {
		t.Fatalf("sale after the outage: %v", err)
	}
}

func sku(i int) string { return "sku-" + string(rune('a'+i%26)) + string(rune('a'+i/26)) }

// settledGoroutines is the goroutine count once the exiting ones are gone.
func settledGoroutines() int {
	n := runtime.NumGoroutine()
	for range 20 {
		time.Sleep(50 * time.Millisecond)
		n = min(n, runtime.NumGoroutine())
	}
	return n
}
