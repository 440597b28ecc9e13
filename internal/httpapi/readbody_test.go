package httpapi

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/gin-gonic/gin"
)

// Most deducts carry no body: reading it must cost nothing.
func TestAnEmptyBodyIsNotRead(t *testing.T) {
	c, _ := gin.CreateTestContext(httptest.NewRecorder())
	c.Request = httptest.NewRequest(http.MethodPost, "/api/stages/atomic/deduct", nil)
	if c.Request.Body != http.NoBody {
		t.Fatalf("test request body %T: want http.NoBody, as the server gives", c.Request.Body)
	}
	var s Server
	allocs := testing.AllocsPerRun(100, func() {
		if raw, ok := s.readBody(c); !ok || len(raw) != 0 {
			t.Fatalf("readBody = %q, %v", raw, ok)
		}
	})
	if allocs != 0 {
		t.Errorf("readBody of no body: %v allocations, want 0", allocs)
	}
}
