package flagenv

import (
	"flag"
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
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs := flag.NewFlagSet("test", flag.ContinueOnError)
			fs.SetOutput(io.Discard)
			addr := fs.String("redis-addr", "d", "")
			n := fs.Int("count", 1, "")
			err := Parse(fs, tc.args, func(k string) string { return tc.env[k] })
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want one naming %s", err, tc.wantErr)
				}
				return
			}
			if err != nil || *addr != tc.want || *n != tc.wantN {
				t.Fatalf("got %q, %d, %v; want %q, %d", *addr, *n, err, tc.want, tc.wantN)
			}
		})
	}
}

func TestList(t *testing.T) {
	for in, want := range map[string]string{"": "", "a": "a", " a , ,b,": "a|b"} {
		if got := strings.Join(List(in), "|"); got != want {
			t.Errorf("List(%q) = %q, want %q", in, got, want)
		}
	}
}
