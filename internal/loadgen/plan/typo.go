package plan

import (
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"strings"

	"gopkg.in/yaml.v3"
)

// notFound is yaml's message for a field its type does not have.
var notFound = regexp.MustCompile(`field (\S+) not found in type plan\.(\w+)`)

// explainUnknownFields adds, to a decoding error whose unknown field
// belongs to the sibling key — `fault:` (one fault step) and `faults:` (the
// shop's fault knobs) differ by a letter — where that field goes.
func explainUnknownFields(err error) error {
	var typeErr *yaml.TypeError
	if !errors.As(err, &typeErr) {
		return err
	}
	var hints []string
	for _, msg := range typeErr.Errors {
		m := notFound.FindStringSubmatch(msg)
		if m == nil {
			continue
		}
		switch field, in := m[1], m[2]; {
		case in == "FaultStep" && hasYAMLField(Faults{}, field):
			hints = append(hints, fmt.Sprintf("%q is one of the shop's fault knobs: it goes under `faults:` (with an s); `fault:` is one fault step (kind: crash, pause, …)", field))
		case in == "Faults" && hasYAMLField(FaultStep{}, field):
			hints = append(hints, fmt.Sprintf("%q belongs to a fault step: it goes under `fault:` (no s); `faults:` holds the shop's fault knobs (work, lock_ttl, …)", field))
		}
	}
	if len(hints) == 0 {
		return err
	}
	return fmt.Errorf("%w\n%s", err, strings.Join(hints, "\n"))
}

// hasYAMLField reports whether v's struct type has a field named name in
// YAML.
func hasYAMLField(v any, name string) bool {
	t := reflect.TypeOf(v)
	for i := range t.NumField() {
		tag, _, _ := strings.Cut(t.Field(i).Tag.Get("yaml"), ",")
		if tag == name {
			return true
		}
	}
	return false
}
