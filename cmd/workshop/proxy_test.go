package main

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

// TestGoProxyForwardsTheClientAddress: like nginx, the Go fallback proxy
// tells the shops a request was forwarded, and from where; a shop without
// an admin token refuses admin requests that carry that header.
func TestGoProxyForwardsTheClientAddress(t *testing.T) {
	seen := make(chan string, 2)
	shop := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen <- r.Header.Get("X-Forwarded-For")
	}))
	defer shop.Close()
	p, err := startGoProxy([]string{shop.Listener.Addr().String()}, "test")
	if err != nil {
		t.Fatal(err)
	}
	defer p.stop()

	for _, tc := range []struct{ prior, want string }{
		{"", "127.0.0.1"},
		{"203.0.113.7", "203.0.113.7, 127.0.0.1"},
	} {
		req, _ := http.NewRequest(http.MethodGet, p.url+"/healthz", nil)
		if tc.prior != "" {
			req.Header.Set("X-Forwarded-For", tc.prior)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if got := <-seen; got != tc.want {
			t.Errorf("prior %q: the shop saw X-Forwarded-For %q, want %q", tc.prior, got, tc.want)
		}
	}
}
