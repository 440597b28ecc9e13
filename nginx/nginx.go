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
}

// Render writes nginx.conf for c.
func Render(w io.Writer, c Config) error {
	if c.Listen == "" || len(c.Upstreams) == 0 || c.WorkerProcesses < 1 {
		return errors.New("nginx: listen address, upstreams and worker processes are required")
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
