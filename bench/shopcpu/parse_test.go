package main

import (
	"testing"
	"time"
)

func TestParseWrk(t *testing.T) {
	for _, tc := range []struct {
		name, out string
		want      wrkResult
		err       bool
	}{
		{name: "all 200", out: "Running 3s test @ http://127.0.0.1:1/healthz\n  1 threads and 32 connections\n  95120 requests in 3.00s, 15.15MB read\nRequests/sec:  31706.52\n",
			want: wrkResult{ok: 95120, elapsed: 3 * time.Second}},
		{name: "refusals and socket errors", out: "  1200 requests in 1.50s, 1MB read\n  Socket errors: connect 0, read 2, write 1, timeout 3\n  Non-2xx or 3xx responses: 100\n",
			want: wrkResult{ok: 1094, other: 106, elapsed: 1500 * time.Millisecond}},
		{name: "no count", out: "unable to connect to 127.0.0.1:1 Connection refused\n", err: true},
		{name: "nothing succeeded", out: "  10 requests in 1.00s, 1KB read\n  Non-2xx or 3xx responses: 10\n", err: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseWrk(tc.out)
			if (err != nil) != tc.err || got != tc.want {
				t.Errorf("parseWrk = %+v, %v; want %+v, error %v", got, err, tc.want, tc.err)
			}
		})
	}
}
