package flagenv

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
)

// The checks below let a command refuse a flag's value while it parses its
// flags, before it starts anything: a value only a dial, a listen or a
// server would refuse otherwise surfaces after minutes of start-up, and as
// a failed run (1) instead of a usage error (2). Each names the flag; a
// command joins the ones it needs and marks the result with Usage.

// OneOf refuses a value that is none of choices.
func OneOf(flagName, value string, choices ...string) error {
	if slices.Contains(choices, value) {
		return nil
	}
	return fmt.Errorf("--%s %q: want %s", flagName, value, strings.Join(choices, ", "))
}

// HostPort refuses a value that is not host:port with a numeric port.
func HostPort(flagName, value string) error {
	host, port, err := net.SplitHostPort(value)
	if err != nil {
		return fmt.Errorf("--%s %q: want host:port", flagName, value)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		return fmt.Errorf("--%s %q: the port must be a number from 0 to 65535", flagName, value)
	}
	if strings.ContainsAny(host, " /") {
		return fmt.Errorf("--%s %q: %q is not a host name", flagName, value, host)
	}
	return nil
}

// HostPorts checks each address of a comma-separated list; an empty list
// passes (the flags that must name one say so themselves).
func HostPorts(flagName, list string) error {
	var errs []error
	for _, addr := range List(list) {
		errs = append(errs, HostPort(flagName, addr))
	}
	return errors.Join(errs...)
}

// URL refuses a value that is not an absolute http or https URL with a
// host.
func URL(flagName, value string) error {
	u, err := url.Parse(value)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("--%s %q: want an http:// or https:// URL", flagName, value)
	}
	return nil
}

// URLs checks each URL of a comma-separated list; an empty list passes.
func URLs(flagName, list string) error {
	var errs []error
	for _, u := range List(list) {
		errs = append(errs, URL(flagName, u))
	}
	return errors.Join(errs...)
}

// LogLevel refuses a level log/slog does not know.
func LogLevel(flagName, value string) error {
	var level slog.Level
	if err := level.UnmarshalText([]byte(value)); err != nil {
		return fmt.Errorf("--%s %q: want debug, info, warn or error", flagName, value)
	}
	return nil
}

// Check is a condition a flag's value must meet: when ok is false, the
// error says what the flag wants.
func Check(ok bool, flagName, wants string) error {
	if ok {
		return nil
	}
	return fmt.Errorf("--%s: %s", flagName, wants)
}
