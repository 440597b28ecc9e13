package inventory

import (
	"errors"
	"strings"
	"testing"
)

// An unavailable error names the inventory once: the layer adds its own
// context (the operation) and nothing the error below already says.
func TestUnavailableErrorsNameTheLayerOnce(t *testing.T) {
	below := errors.New("dial tcp 127.0.0.1:1: connect: connection refused")
	for _, err := range []error{unavailable("acquire lock", below), unavailable("ping", below)} {
		if n := strings.Count(err.Error(), "inventory"); n != 1 || !errors.Is(err, ErrUnavailable) || !strings.HasSuffix(err.Error(), below.Error()) {
			t.Errorf("%q: says inventory %d times (want once), is ErrUnavailable %t", err, n, errors.Is(err, ErrUnavailable))
		}
	}
}
