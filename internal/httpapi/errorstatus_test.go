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

// TestMayHaveSoldIsItsOwnCode: an error after which the sale may have
// happened has a code of its own, whichever server lost the reply, so a
// client tells "nothing sold, retry" from "may have sold" without reading
// the message (issue 34).
func TestMayHaveSoldIsItsOwnCode(t *testing.T) {
	for _, server := range []error{inventory.ErrUnavailable, inventory.ErrMySQLUnavailable, inventory.ErrOrdersUnavailable} {
		err := fmt.Errorf("inventory: commit sale: %w: %w: i/o timeout", server, inventory.ErrOutcomeUnknown)
		if status, code := errorStatus(err); status != http.StatusServiceUnavailable || code != CodeMayHaveSold {
			t.Errorf("%v: got %d %s, want 503 %s", err, status, code, CodeMayHaveSold)
		}
		if _, code := errorStatus(fmt.Errorf("inventory: commit sale: %w: i/o timeout", server)); code == CodeMayHaveSold {
			t.Errorf("%v without ErrOutcomeUnknown answered %s", server, code)
		}
	}
}
