package shopapi

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// A failed request to the shop names its URL once (net/http's error
// already says the method and URL), and a refusal says the shop's answer.
func TestShopClientErrorsSayEachThingOnce(t *testing.T) {
	srv := httptest.NewServer(nil)
	gone := srv.URL
	srv.Close()
	c := New("")
	_, err := c.Audit(context.Background(), gone, "atomic", "sku-1")
	if err == nil || strings.Count(err.Error(), gone) != 1 {
		t.Errorf("audit of a shop that is gone: %q, want its URL named once", err)
	}
	refusing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = w.Write([]byte(`{"error":"redis_unavailable","message":"inventory: redis unavailable: ping: EOF"}`))
	}))
	defer refusing.Close()
	_, err = c.Audit(context.Background(), refusing.URL, "atomic", "sku-1")
	if err == nil || strings.Count(err.Error(), refusing.URL) != 1 || strings.Count(err.Error(), "redis unavailable") != 1 {
		t.Errorf("refused audit: %q, want the URL and the shop's message once", err)
	}
}
