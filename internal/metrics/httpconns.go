package metrics

import (
	"net"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
)

// HTTPConns registers lockstep_http_open_conns, the connections the shop's
// HTTP server holds open, and returns the http.Server.ConnState hook that
// counts them. net/http serves each connection on a goroutine of its own
// and keeps it while a client (the proxy's keep-alive pool, which grows
// with the highest concurrency seen) leaves it open: cmd/soak subtracts
// them from the goroutines to judge what the shop itself keeps running.
func (m *Metrics) HTTPConns() func(net.Conn, http.ConnState) {
	open := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "lockstep_http_open_conns", Help: "Connections the shop's HTTP server holds open.",
	})
	m.Registry.MustRegister(open)
	return func(_ net.Conn, state http.ConnState) {
		switch state {
		case http.StateNew:
			open.Inc()
		case http.StateHijacked, http.StateClosed:
			open.Dec()
		}
	}
}
