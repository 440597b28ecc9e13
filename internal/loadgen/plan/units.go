package plan

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// Stock is a run's stock. Written in a scenario it is at least 1: an
// unset one takes the default, so a written 0 is refused rather than
// silently becoming it. The shop's largest is checked with the run
// (Shop.MaxStock).
type Stock int

// UnmarshalYAML accepts a whole number of at least 1.
func (s *Stock) UnmarshalYAML(node *yaml.Node) error {
	var n int
	if err := node.Decode(&n); err != nil {
		return fmt.Errorf("stock %q: want a whole number", node.Value)
	}
	if n < 1 {
		return fmt.Errorf("stock %d: must be at least 1 (leave it out for the default)", n)
	}
	*s = Stock(n)
	return nil
}

// Rate is requests per second; 0 means as fast as the workers go ("max").
type Rate int

// MaxRate is the Rate that lets the workers send as fast as answers come.
const MaxRate Rate = 0

func (r Rate) String() string {
	if r == MaxRate {
		return "max"
	}
	return strconv.Itoa(int(r)) + "/s"
}

// UnmarshalYAML accepts "max" or a non-negative number.
func (r *Rate) UnmarshalYAML(node *yaml.Node) error {
	return r.parse(node.Value)
}

// MarshalJSON writes "max" or the number.
func (r Rate) MarshalJSON() ([]byte, error) {
	if r == MaxRate {
		return []byte(`"max"`), nil
	}
	return []byte(strconv.Itoa(int(r))), nil
}

// UnmarshalJSON accepts what MarshalJSON writes.
func (r *Rate) UnmarshalJSON(b []byte) error {
	return r.parse(strings.Trim(string(b), `"`))
}

func (r *Rate) parse(s string) error {
	if strings.EqualFold(s, "max") {
		*r = MaxRate
		return nil
	}
	n, err := strconv.Atoi(strings.TrimSuffix(s, "/s"))
	if err != nil || n < 0 {
		return fmt.Errorf("rate %q: want \"max\" or requests per second", s)
	}
	*r = Rate(n)
	return nil
}

// Duration is a time.Duration written as "250ms" in scenarios and reports.
type Duration time.Duration

// D returns the time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

func (d Duration) String() string { return time.Duration(d).String() }

// UnmarshalYAML accepts a Go duration string.
func (d *Duration) UnmarshalYAML(node *yaml.Node) error { return d.parse(node.Value) }

// MarshalJSON writes the Go duration string.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(d.String()) }

// UnmarshalJSON accepts a Go duration string.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("duration: %w", err)
	}
	return d.parse(s)
}

func (d *Duration) parse(s string) error {
	v, err := time.ParseDuration(s)
	if err != nil || v < 0 {
		return fmt.Errorf("duration %q: want a non-negative Go duration such as 250ms", s)
	}
	*d = Duration(v)
	return nil
}
