package flagenv

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		name    string
		env     map[string]string
		args    []string
		want    string
		wantN   int
		wantErr string
	}{
		{name: "default", want: "d", wantN: 1},
		{name: "environment", env: map[string]string{"LOCKSTEP_REDIS_ADDR": "e", "LOCKSTEP_COUNT": "7"}, want: "e", wantN: 7},
		{name: "flag beats environment", env: map[string]string{"LOCKSTEP_REDIS_ADDR": "e"}, args: []string{"-redis-addr", "f"}, want: "f", wantN: 1},
		{name: "bad environment value", env: map[string]string{"LOCKSTEP_COUNT": "x"}, wantErr: "LOCKSTEP_COUNT"},
		{name: "unknown flag", args: []string{"-nope"}, wantErr: "nope"},
		{name: "bad flag value", args: []string{"-count", "many"}, wantErr: "many"},
		{name: "stray argument", args: []string{"-count", "2", "stray"}, wantErr: "stray"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs := flag.NewFlagSet("test", flag.ContinueOnError)
			fs.SetOutput(io.Discard)
			addr := fs.String("redis-addr", "d", "")
			n := fs.Int("count", 1, "")
			err := Parse(fs, tc.args, func(k string) string { return tc.env[k] })
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || ExitStatus(err) != ExitUsage {
					t.Fatalf("err = %v (exit status %d), want a usage error naming %s", err, ExitStatus(err), tc.wantErr)
				}
				return
			}
			if err != nil || *addr != tc.want || *n != tc.wantN {
				t.Fatalf("got %q, %d, %v; want %q, %d", *addr, *n, err, tc.want, tc.wantN)
			}
		})
	}
}

// Asking for help is no failure; any other error is.
func TestExitStatus(t *testing.T) {
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	help := Parse(fs, []string{"-h"}, func(string) string { return "" })
	for _, tc := range []struct {
		err  error
		want int
	}{{nil, 0}, {help, 0}, {errors.New("redis down"), 1}, {Usage(errors.New("bad")), ExitUsage}, {fmt.Errorf("wrapped: %w", Usage(errors.New("bad"))), ExitUsage}} {
		if got := ExitStatus(tc.err); got != tc.want {
			t.Errorf("ExitStatus(%v) = %d, want %d", tc.err, got, tc.want)
		}
	}
}

func TestList(t *testing.T) {
	for in, want := range map[string]string{"": "", "a": "a", " a , ,b,": "a|b"} {
		if got := strings.Join(List(in), "|"); got != want {
			t.Errorf("List(%q) = %q, want %q", in, got, want)
		}
	}
}
