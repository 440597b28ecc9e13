package httpapi

import (
	"errors"
	"fmt"
	"net/http"
	"testing"

	"github.com/lockstep/lockstep/inventory"
)

// TestUnavailableNamesTheServer: a lock-server stage's failure names the
// server that did not answer, not Redis; an order stage's order database is
// orders_unavailable.
func TestUnavailableNamesTheServer(t *testing.T) {
	cause := errors.New("i/o timeout")
	for _, tc := range []struct {
		err  error
		code string
	}{
		{inventory.ErrUnavailable, CodeRedisUnavailable},
		{inventory.ErrMySQLUnavailable, CodeMySQLUnavailable},
		{inventory.ErrEtcdUnavailable, CodeEtcdUnavailable},
		{inventory.ErrZooKeeperUnavailable, CodeZooKeeperUnavailable},
		{inventory.ErrOrdersUnavailable, CodeOrdersUnavailable},
	} {
		status, code := errorStatus(fmt.Errorf("inventory: acquire lock: %w: %w", tc.err, cause))
		if status != http.StatusServiceUnavailable || code != tc.code {
			t.Errorf("%v: got %d %s, want 503 %s", tc.err, status, code, tc.code)
		}
	}
}
