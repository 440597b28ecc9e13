// Command loadgen walks the stages of a scenario against a running shop (by
// default through nginx on :8080): reset stock, set the stage's faults,
// attack with vegeta, read the audit, and so on. It prints the results table
// and writes report.json and report.html.
//
// Every flag has an environment fallback, LOCKSTEP_<FLAG> with dashes as
// underscores (LOCKSTEP_TARGET, LOCKSTEP_ADMIN_TOKEN, ...); a flag given on
// the command line wins.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/lockstep/lockstep/internal/flagenv"
	"github.com/lockstep/lockstep/internal/loadgen"
	"github.com/lockstep/lockstep/internal/loadgen/progress"
	"github.com/lockstep/lockstep/internal/loadgen/report"
	"github.com/lockstep/lockstep/internal/shoprules"
	"github.com/lockstep/lockstep/internal/storeview"
	"github.com/lockstep/lockstep/scenarios"
)

// main exits 0 after --help or a run that met its expectations, 1 when
// the run failed, 2 on a usage error (a flag, a scenario that does not
// load, a stage the shop does not have), 3 when expectations were not met
// and 130 when interrupted (the report is written all the same).
func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
	interrupted := ctx.Err() != nil
	stop()
	status := loadgen.ExitStatus(err, interrupted)
	switch {
	case interrupted:
		fmt.Fprintln(os.Stderr, "loadgen: interrupted")
	case status != 0:
		fmt.Fprintln(os.Stderr, "loadgen:", err)
	}
	os.Exit(status)
}

type options struct {
	target, replicaURLs, adminToken, redisAddr, redisPassword string
	redisCluster                                              string
	scenario, out, only, render                               string
	grafanaURL, grafanaToken                                  string
}

func parseFlags(args []string, getenv func(string) string) (options, error) {
	var o options
	fs := flag.NewFlagSet("loadgen", flag.ContinueOnError)
	fs.StringVar(&o.target, "target", "http://127.0.0.1:8080", "base URL the stages are attacked through (nginx)")
	fs.StringVar(&o.replicaURLs, "replica-urls", "", "the replicas' own base URLs, comma-separated: lets the run wait for each replica and run one-replica stages")
	fs.StringVar(&o.adminToken, "admin-token", "", "bearer token of the shop's admin routes")
	fs.StringVar(&o.redisAddr, "redis-addr", "", "Redis address(es) of the shops, comma-separated; the first lets the crash step inspect lock keys")
	fs.StringVar(&o.redisCluster, "redis-cluster", "", "seed addresses of the Redis Cluster the shops run on, comma-separated (instead of --redis-addr): the crash step scans every master, and each stage's commands and cores per master are reported")
	fs.StringVar(&o.redisPassword, "redis-password", "", "Redis password")
	fs.StringVar(&o.scenario, "scenario", "", "scenario file (YAML or JSON); empty: the built-in scenarios/default.yaml")
	fs.StringVar(&o.only, "only", "", "run only these stages of the scenario, comma-separated")
	fs.StringVar(&o.out, "out", "out/loadgen", "directory for report.json and report.html")
	fs.StringVar(&o.grafanaURL, "grafana-url", "", "Grafana base URL, optionally with user:password@ for basic auth: each stage run is annotated there (tags lockstep and the stage); failures are warnings")
	fs.StringVar(&o.grafanaToken, "grafana-token", "", "Grafana service account token, sent as a bearer token instead of the URL's basic auth")
	fs.StringVar(&o.render, "render", "", "attack nothing: print the table and rewrite report.html (into --out) from this earlier report.json")
	if err := flagenv.Parse(fs, args, getenv); err != nil {
		return o, err
	}
	if err := o.check(); err != nil {
		return o, flagenv.Usage(err)
	}
	return o, nil
}

// check refuses every address and URL before the run waits for, resets
// or attacks anything (the scenario and --only are checked as they load).
func (o options) check() error {
	var grafana error
	if o.grafanaURL != "" {
		grafana = flagenv.URL("grafana-url", o.grafanaURL)
	}
	return errors.Join(
		flagenv.URL("target", o.target),
		flagenv.URLs("replica-urls", o.replicaURLs),
		flagenv.HostPorts("redis-addr", o.redisAddr),
		flagenv.HostPorts("redis-cluster", o.redisCluster),
		flagenv.Check(o.redisAddr == "" || o.redisCluster == "", "redis-cluster", "instead of --redis-addr, not with it"),
		flagenv.Check(o.grafanaToken == "" || o.grafanaURL != "", "grafana-token", "goes with --grafana-url"),
		grafana,
		flagenv.Check(o.out != "", "out", "a directory"),
	)
}

func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	o, err := parseFlags(args, getenv)
	if err != nil {
		return err
	}
	if o.render != "" {
		rep, err := report.ReadReport(o.render)
		if err != nil {
			return flagenv.Usage(err)
		}
		return report.Publish(rep, o.out, stdout)
	}
	sc, name, err := scenarios.Load(o.scenario)
	if err != nil {
		return flagenv.Usage(err)
	}
	if o.only != "" {
		if err := sc.Only(flagenv.List(o.only)); err != nil {
			return flagenv.Usage(err)
		}
	}
	redisAddrs := flagenv.List(o.redisAddr)
	cfg := loadgen.Config{
		Target:       o.target,
		ReplicaURLs:  flagenv.List(o.replicaURLs),
		AdminToken:   o.adminToken,
		Shop:         shoprules.Shop(),
		Scenario:     sc,
		ScenarioFile: name,
		GrafanaURL:   o.grafanaURL,
		GrafanaToken: o.grafanaToken,
		Progress:     stderr,
		Interactive:  progress.IsTerminal(stderr),
		Logger:       slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	}
	addrs := storeview.Addrs{Cluster: flagenv.List(o.redisCluster), Password: o.redisPassword}
	if len(redisAddrs) > 0 {
		addrs.Addr = redisAddrs[0]
	}
	if stores := storeview.Open(addrs); stores != nil {
		defer stores.Close()
		cfg.Stores = stores
	}
	rep, runErr := loadgen.Run(ctx, cfg)
	if rep == nil {
		return runErr
	}
	if err := errors.Join(runErr, report.Publish(rep, o.out, stdout)); err != nil {
		return err
	}
	return rep.Verdict()
}
