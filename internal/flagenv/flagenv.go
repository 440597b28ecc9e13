// Package flagenv gives every flag of a command an environment fallback:
// flag -redis-addr reads LOCKSTEP_REDIS_ADDR when the command line does not
// set it.
package flagenv

import (
	"errors"
	"flag"
	"fmt"
	"strings"
)

// Name is the environment variable behind flag name.
func Name(flagName string) string {
	return "LOCKSTEP_" + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// Parse sets each flag of fs from its environment variable, when getenv
// returns one, and then parses args, so the command line overrides the
// environment. Bad environment values are reported by variable name.
func Parse(fs *flag.FlagSet, args []string, getenv func(string) string) error {
	var envErr error
	fs.VisitAll(func(f *flag.Flag) {
		name := Name(f.Name)
		if v := getenv(name); v != "" {
			if err := fs.Set(f.Name, v); err != nil {
				envErr = errors.Join(envErr, fmt.Errorf("%s: %w", name, err))
			}
		}
	})
	if envErr != nil {
		return envErr
	}
	return fs.Parse(args)
}

// List splits a comma-separated flag value, trimming spaces and dropping
// empty entries.
func List(s string) []string {
	var out []string
	for _, part := range strings.Split(s, ",") {
		if part = strings.TrimSpace(part); part != "" {
			out = append(out, part)
		}
	}
	return out
}
