package main

import (
	"testing"
	"time"

	"github.com/lockstep/lockstep/internal/flagenv"
)

func TestFlagsFallBackToEnvironment(t *testing.T) {
	env := map[string]string{
		"LOCKSTEP_ADDR":               ":9999",
		"LOCKSTEP_REDIS_ADDR":         "a:1,b:2,c:3",
		"LOCKSTEP_REDIS_PASSWORD":     "pw",
		"LOCKSTEP_REPLICA":            "shop-2",
		"LOCKSTEP_ADMIN_TOKEN":        "tok",
		"LOCKSTEP_LOCK_WAIT":          "250ms",
		"LOCKSTEP_REDIS_SENTINEL":     "s1:26379, s2:26379,,s3:26379",
		"LOCKSTEP_REDIS_MASTER":       "lockstep",
		"LOCKSTEP_HOLDERS_REDIS_ADDR": "h:6379",
		"LOCKSTEP_REDIS_CLUSTER":      "n1:7000,n2:7001",
	}
	o, err := parseFlags([]string{"--replica", "from-flag"}, func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	if o.addr != ":9999" || o.redisAddr != "a:1,b:2,c:3" || o.redisPassword != "pw" || o.adminToken != "tok" || o.lockWait != 250*time.Millisecond {
		t.Errorf("environment not applied: %+v", o)
	}
	if got := flagenv.List(o.redisSentinel); len(got) != 3 || got[1] != "s2:26379" || o.redisMaster != "lockstep" || o.holdersRedisAddr != "h:6379" {
		t.Errorf("sentinel settings: %q master %q holders %q", got, o.redisMaster, o.holdersRedisAddr)
	}
	if got := flagenv.List(o.redisCluster); len(got) != 2 || got[1] != "n2:7001" {
		t.Errorf("cluster seeds: %q", got)
	}
	if o.replica != "from-flag" {
		t.Errorf("replica = %q: a flag must win over the environment", o.replica)
	}
}

func TestFlagDefaults(t *testing.T) {
	o, err := parseFlags(nil, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	if o.addr != ":8080" || o.defaultStock != 500 || o.segments != 16 || o.idempotencyTTL != 24*time.Hour || o.replica == "" {
		t.Errorf("defaults: %+v", o)
	}
}

func TestBadEnvironmentIsAnError(t *testing.T) {
	if _, err := parseFlags(nil, func(k string) string {
		if k == "LOCKSTEP_LOCK_WAIT" {
			return "soon"
		}
		return ""
	}); err == nil {
		t.Fatal("LOCKSTEP_LOCK_WAIT=soon accepted")
	}
}

func TestPprofAddrMustBeLoopback(t *testing.T) {
	for _, tc := range []struct {
		addr string
		ok   bool
	}{
		{"", true},
		{"127.0.0.1:6060", true},
		{"localhost:6060", true},
		{"[::1]:6060", true},
		{":6060", false}, // every interface
		{"0.0.0.0:6060", false},
		{"10.0.0.1:6060", false},
		{"127.0.0.1", false},
	} {
		_, err := parseFlags([]string{"--pprof-addr", tc.addr}, func(string) string { return "" })
		if (err == nil) != tc.ok {
			t.Errorf("--pprof-addr %q: err = %v, want ok %v", tc.addr, err, tc.ok)
		}
	}
}
