package flagenv

import (
	"strings"
	"testing"
)

func TestChecks(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		ok   bool
	}{
		{"one of", OneOf("proxy", "go", "auto", "nginx", "go"), true},
		{"none of", OneOf("proxy", "foo", "auto", "nginx", "go"), false},
		{"host:port", HostPort("addr", "127.0.0.1:6379"), true},
		{"any host", HostPort("addr", ":8080"), true},
		{"no port", HostPort("addr", "foo"), false},
		{"port not a number", HostPort("addr", "foo:bar"), false},
		{"port too big", HostPort("addr", "foo:70000"), false},
		{"list", HostPorts("redis-addr", "a:1, b:2"), true},
		{"empty list", HostPorts("redis-addr", ""), true},
		{"list with a bad one", HostPorts("redis-addr", "a:1,b"), false},
		{"url", URL("target", "http://127.0.0.1:8080"), true},
		{"url without a scheme", URL("target", "127.0.0.1:8080"), false},
		{"url of another scheme", URL("target", "ftp://x"), false},
		{"urls", URLs("replica-urls", "http://a:1,https://b"), true},
		{"urls with a bad one", URLs("replica-urls", "http://a:1,b"), false},
		{"log level", LogLevel("log-level", "warn"), true},
		{"bad log level", LogLevel("log-level", "loud"), false},
		{"check", Check(true, "rate", "at least 1"), true},
		{"failed check", Check(false, "rate", "at least 1"), false},
	} {
		if (tc.err == nil) != tc.ok {
			t.Errorf("%s: %v, want ok=%v", tc.name, tc.err, tc.ok)
		}
		if tc.err != nil && !strings.HasPrefix(tc.err.Error(), "--") {
			t.Errorf("%s: %q does not name its flag first", tc.name, tc.err)
		}
	}
}
