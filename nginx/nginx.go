// Package nginx holds the nginx configuration that fronts the shop replicas
// (nginx.conf, a text/template) and renders it onto given addresses.
package nginx

import (
	_ "embed"
	"errors"
	"fmt"
	"io"
	"text/template"
)

//go:embed nginx.conf
var confTemplate string

// Config fills the template's fields.
type Config struct {
	Listen          string
	Upstreams       []string
	WorkerProcesses int
	// Limit, optional, is limit-nginx: limit_req on the deducts.
	Limit *Limit
}

// Limit is limit-nginx's rates in requests per second, each with a burst
// of requests admitted at once (as the shop's --limit-* flags); a zero
// rate is no limit.
type Limit struct {
	PerBuyer, BuyerBurst int
	Global, GlobalBurst  int
}

// Render writes nginx.conf for c.
func Render(w io.Writer, c Config) error {
	if c.Listen == "" || len(c.Upstreams) == 0 || c.WorkerProcesses < 1 {
		return errors.New("nginx: listen address, upstreams and worker processes are required")
	}
	if l := c.Limit; l != nil && (l.PerBuyer < 0 || l.Global < 0 || l.BuyerBurst < 0 || l.GlobalBurst < 0) {
		return errors.New("nginx: negative limit")
	}
	tmpl, err := template.New("nginx.conf").Option("missingkey=error").Parse(confTemplate)
	if err != nil {
		return fmt.Errorf("nginx: parse template: %w", err)
	}
	if err := tmpl.Execute(w, c); err != nil {
		return fmt.Errorf("nginx: render: %w", err)
	}
	return nil
}

// BuyerExcess and GlobalExcess are limit_req's burst: the requests
// admitted beyond the first, so that a burst of n admits n at once.
func (l Limit) BuyerExcess() int  { return max(l.BuyerBurst-1, 0) }
func (l Limit) GlobalExcess() int { return max(l.GlobalBurst-1, 0) }
