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
		return Usage(envErr)
	}
	return ParseArgs(fs, args)
}

// ParseArgs parses args, which must all be flags: a bad flag, a bad value
// or an argument left over is a usage error (Usage); asking for help
// returns flag.ErrHelp.
func ParseArgs(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return Usage(err)
	}
	if fs.NArg() > 0 {
		return Usage(fmt.Errorf("unexpected argument %q: %s takes flags only (-h lists them)", fs.Arg(0), fs.Name()))
	}
	return nil
}

// ErrUsage marks an error in how a command was called: a flag, its value,
// an argument, or a file a flag names. Commands exit 2 on it, as Go's flag
// package does, apart from a run that failed (1).
var ErrUsage = errors.New("usage error")

// Usage marks err as a usage error; its message stays err's.
func Usage(err error) error { return usageError{err} }

type usageError struct{ err error }

func (e usageError) Error() string   { return e.err.Error() }
func (e usageError) Unwrap() []error { return []error{ErrUsage, e.err} }

// Exit statuses every command shares: a usage error (Go's flag package's),
// and a run interrupted by SIGINT or SIGTERM (the shell's 128+SIGINT).
const (
	ExitUsage       = 2
	ExitInterrupted = 130
)

// ExitStatus is the exit status of a command that ended with err: 0 for
// none or for a request for help (the usage is printed), ExitUsage for a
// usage error, 1 for any other.
func ExitStatus(err error) int {
	switch {
	case err == nil || errors.Is(err, flag.ErrHelp):
		return 0
	case errors.Is(err, ErrUsage):
		return ExitUsage
	}
	return 1
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
