// Command workshop brings a whole local lockstep workshop up with nothing
// but Go: a private Redis (redis-server from PATH on a free loopback port,
// else an embedded one), N shop replicas as separate processes (restarted
// when one exits, e.g. after a crash while holding a lock), nginx in front
// of them (or a Go round-robin proxy when nginx is not installed), then
// walks the scenario's stages with the load generator, prints the results
// table and writes the report. Every process it started is stopped on exit
// and on Ctrl-C.
//
//	go run ./cmd/workshop                 # the default scenario
//	go run ./cmd/workshop --keep          # and leave it running to explore
package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"

	"github.com/lockstep/lockstep/internal/flagenv"
	"github.com/lockstep/lockstep/internal/launch"
	"github.com/lockstep/lockstep/internal/loadgen"
	"github.com/lockstep/lockstep/internal/loadgen/plan"
	"github.com/lockstep/lockstep/internal/loadgen/progress"
	"github.com/lockstep/lockstep/internal/loadgen/report"
	"github.com/lockstep/lockstep/internal/shoprules"
	"github.com/lockstep/lockstep/internal/storeview"
	"github.com/lockstep/lockstep/inventory"
	"github.com/lockstep/lockstep/scenarios"
)

func main() {
	ctx, cancel := context.WithCancel(context.Background())
	signals := make(chan os.Signal, 2)
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM)
	done := make(chan struct{})
	handled := make(chan struct{})
	go func() {
		defer close(handled)
		select {
		case <-signals:
			cancel()
		case <-done:
			return
		}
		fmt.Fprintln(os.Stderr, "\nworkshop: interrupted; stopping every process it started")
		for {
			select {
			case <-signals:
				fmt.Fprintln(os.Stderr, "workshop: still stopping, a few seconds at most")
			case <-done:
				return
			}
		}
	}()
	err := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	interrupted := ctx.Err() != nil
	close(done)
	<-handled
	signal.Stop(signals)
	cancel()
	// 0 after --help or a run that met its expectations, 1 when it failed,
	// 2 on a usage error, 3 when expectations were not met, 130 interrupted.
	status := loadgen.ExitStatus(err, interrupted)
	if status != 0 && !interrupted {
		fmt.Fprintln(os.Stderr, "workshop:", err)
	}
	os.Exit(status)
}

type options struct {
	replicas, redisMasters               int
	scenario, out, proxy, redis, shopBin string
	lockServers                          string
	adminToken, only, liveAddr           string
	keep, step, liveRoom                 bool
	// frontDoor is the limiter and sold-out mark of every run that names
	// none (a scenario's front_door overrides it for its run).
	frontDoor plan.FrontDoor
}

func parseFlags(args []string) (options, error) {
	var o options
	fs := flag.NewFlagSet("workshop", flag.ContinueOnError)
	fs.IntVar(&o.replicas, "replicas", 3, "shop replicas, each a separate process")
	fs.StringVar(&o.scenario, "scenario", "", "scenario: a file (YAML or JSON) or a built-in name ("+strings.Join(scenarios.Names(), ", ")+"), or several, comma-separated; empty: default")
	fs.StringVar(&o.out, "out", "out/workshop", "directory for report.json, report.html and workshop.json")
	fs.BoolVar(&o.keep, "keep", false, "leave everything running after the run, until Ctrl-C, to explore by hand")
	fs.StringVar(&o.proxy, "proxy", proxyAuto, "front proxy: auto (nginx when installed), nginx or go")
	fs.StringVar(&o.frontDoor.Limiter, "limiter", plan.LimitNone, "rate limiter before every deduct of every replica: "+strings.Join(plan.Limiters, ", ")+" (limit-nginx: nginx's limit_req, not with --proxy go)")
	fs.IntVar(&o.frontDoor.Buyer, "limit-buyer", 0, "the limiter's deducts per second per buyer (?user=, else the address; 0: no per-buyer limit)")
	fs.IntVar(&o.frontDoor.BuyerBurst, "limit-buyer-burst", 1, "burst of the per-buyer limit")
	fs.IntVar(&o.frontDoor.Global, "limit-global", 0, "the limiter's deducts per second of all buyers (0: no global limit)")
	fs.IntVar(&o.frontDoor.GlobalBurst, "limit-global-burst", 1, "burst of the global limit")
	markTTL := fs.Duration("soldout-mark-ttl", 0, "the sold-out mark of every replica: a SKU learned sold out is answered from memory until pub/sub clears it, or this long at most (0: no mark)")
	fs.StringVar(&o.redis, "redis", redisAuto, "Redis: auto (redis-server when on PATH), server, cluster (a Redis Cluster of 3 masters and 3 replicas; redlock unavailable) or embedded")
	fs.IntVar(&o.redisMasters, "redis-masters", 3, "independent Redis masters; the first holds the stock, three or more make the redlock stage available")
	fs.StringVar(&o.lockServers, "lock-servers", lockServersAuto, "lock servers of the mysql, etcd and zookeeper stages: auto (start MariaDB, a 3-member etcd cluster and a 3-member ZooKeeper ensemble when installed) or off")
	fs.StringVar(&o.shopBin, "shop-bin", "", "shop binary to run; empty: go build ./cmd/shop into a temporary directory")
	fs.StringVar(&o.adminToken, "admin-token", "", "admin token of the shops; empty: a random one")
	fs.StringVar(&o.only, "only", "", "run only these stages of the scenario, comma-separated (e.g. watchdog,segmented)")
	fs.StringVar(&o.liveAddr, "live-addr", "127.0.0.1:0", "address of the live page (port 0: a free one); loopback only, unless --live-room")
	fs.BoolVar(&o.liveRoom, "live-room", false, "let other machines (a room's browsers) open the live page at --live-addr (e.g. 0.0.0.0:8555); \"run this stage\" then asks for the admin token")
	fs.BoolVar(&o.step, "step", false, "wait before each stage until \"run this stage\" is pressed on the live page, or Enter on the terminal")
	if err := flagenv.ParseArgs(fs, args); err != nil {
		return o, err
	}
	o.frontDoor.SoldOutMarkTTL = plan.Duration(*markTTL)
	if err := o.check(); err != nil {
		return o, flagenv.Usage(err)
	}
	return o, nil
}

// check refuses every value the workshop would otherwise refuse only after
// starting Redis, the lock servers and the shops.
func (o options) check() error {
	return errors.Join(
		flagenv.Check(o.replicas >= 1, "replicas", "at least 1"),
		flagenv.Check(o.redisMasters >= 1, "redis-masters", "at least 1"),
		flagenv.OneOf("proxy", o.proxy, proxyAuto, proxyNginx, proxyGo),
		flagenv.OneOf("limiter", o.frontDoor.Limiter, plan.Limiters...),
		flagenv.Check(o.frontDoor.Buyer >= 0 && o.frontDoor.Global >= 0, "limit-buyer", "rates at least 0"),
		flagenv.Check(o.frontDoor.BuyerBurst >= 1 && o.frontDoor.GlobalBurst >= 1, "limit-buyer-burst", "bursts at least 1"),
		flagenv.Check(o.frontDoor.Limiter == plan.LimitNone || o.frontDoor.Buyer > 0 || o.frontDoor.Global > 0, "limiter", "a limiter needs --limit-buyer or --limit-global"),
		flagenv.Check(o.frontDoor.Limiter != plan.LimitNginx || o.proxy != proxyGo, "limiter", "limit-nginx lives in nginx: the Go proxy (--proxy go) cannot limit"),
		flagenv.Check(o.frontDoor.SoldOutMarkTTL >= 0, "soldout-mark-ttl", "at least 0"),
		flagenv.OneOf("redis", o.redis, redisAuto, redisServer, redisCluster, redisEmbedded),
		flagenv.OneOf("lock-servers", o.lockServers, lockServersAuto, lockServersOff),
		checkLiveAddr(o.liveAddr, o.liveRoom),
		checkShopBin(o.shopBin),
	)
}

// state is written to workshop.json once everything is up: where each
// piece listens and its PIDs, for exploring by hand (--keep) and for tests.
type state struct {
	PID        int            `json:"pid"`
	WorkDir    string         `json:"work_dir"`
	AdminToken string         `json:"admin_token"`
	Proxy      stateProxy     `json:"proxy"`
	Replicas   []stateReplica `json:"replicas"`
	Redis      stateRedis     `json:"redis"`
	// LockServers are the PIDs of the lock servers beside Redis, by kind
	// (etcd, mariadb): the ones the workshop started.
	LockServers map[string][]int `json:"lock_servers,omitempty"`
}

type stateProxy struct {
	Kind string `json:"kind"`
	URL  string `json:"url"`
	PIDs []int  `json:"pids"`
}

type stateReplica struct {
	Name string `json:"name"`
	URL  string `json:"url"`
	PID  int    `json:"pid"`
}

type stateRedis struct {
	Kind  string   `json:"kind"`
	Addrs []string `json:"addrs"`
	PIDs  []int    `json:"pids"`
}

func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	o, err := parseFlags(args)
	if err != nil {
		return err // flag.ErrHelp: the usage is printed, and the exit status 0
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	sc, scenarioName, err := loadScenario(o)
	if err != nil {
		return err
	}
	top, err := topologyOf(sc)
	if err != nil {
		return flagenv.Usage(err)
	}
	mode, err := top.redisMode(o.redis)
	if err != nil {
		return flagenv.Usage(err)
	}
	if o.adminToken == "" {
		o.adminToken = randomToken()
	}
	var roomToken string
	if o.liveRoom {
		roomToken = o.adminToken
	}
	lv, err := startLive(o.liveAddr, scenarioName, len(sc.Runs), o.step, roomToken, log)
	if err != nil {
		return err
	}
	defer lv.close()
	fmt.Fprintf(stderr, "workshop: live page: %s\n", lv.url)
	if o.liveRoom {
		fmt.Fprintf(stderr, "workshop: the live page is open to other machines (--live-room); its \"run this stage\" asks for the admin token (admin_token in %s)\n", filepath.Join(o.out, "workshop.json"))
	}
	var enters <-chan struct{}
	if o.step || o.keep {
		enters = readEnters(stdin)
	}
	if o.step {
		lv.enters = enters
	}
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		return fmt.Errorf("--out: %w", err)
	}
	workDir, err := os.MkdirTemp("", "lockstep-workshop-")
	if err != nil {
		return fmt.Errorf("work dir: %w", err)
	}
	defer os.RemoveAll(workDir) // runs last, after every process stopped

	say := func(format string, args ...any) { fmt.Fprintf(stderr, "workshop: "+format+"\n", args...) }
	rs, err := startRedis(ctx, mode, o.redisMasters, workDir)
	if err != nil {
		return err
	}
	defer rs.stop()
	if rs.embedded != nil {
		banner := strings.Repeat("!", 78)
		fmt.Fprintf(stderr, "%s\n!! %s: %s\n%s\n", banner, rs.component.Note, embeddedWarning, banner)
	}
	say("Redis: %s at %s", rs.component, strings.Join(rs.addrs, ", "))
	wiring, err := startWiring(ctx, top, rs, o.replicas, workDir)
	if err != nil {
		return err
	}
	defer wiring.stop()
	if g := wiring.group; g != nil {
		say("Sentinel group (the stock): master %s, replicas and Sentinels at %s; holder counts on %s",
			g.currentMaster().addr, strings.Join(g.sentinelAddrs(), ", "), g.observer.addr)
	}
	if wiring.links != nil {
		say("each shop reaches the stock's Redis through a link the partition step can cut")
	}
	servers, err := startLockServers(ctx, o.lockServers, workDir)
	if err != nil {
		return err
	}
	defer servers.stop()
	say("lock servers: %s", servers.describe())
	say("orders: %s", servers.orders())
	shopEnv := func(name string) []string { return append(wiring.env(name), servers.env()...) }

	if o.shopBin == "" {
		say("building the shop (go build %s)", launch.ShopPackage)
	}
	bin, err := shopBinary(ctx, o.shopBin, workDir)
	if err != nil {
		return err
	}
	doors := newFrontDoors(o.frontDoor)
	replicas, err := startReplicas(ctx, bin, o.replicas, shopEnv, doors.env, o.adminToken, workDir, log)
	if err != nil {
		return err
	}
	defer func() {
		for _, r := range replicas {
			r.sup.stop(syscall.SIGTERM)
		}
	}()
	var upstreams, replicaURLs []string
	for _, r := range replicas {
		upstreams = append(upstreams, r.addr)
		replicaURLs = append(replicaURLs, r.url())
	}
	say("%d shop replicas: %s", len(replicas), strings.Join(replicaURLs, ", "))
	if len(asyncStages(sc)) > 0 && (rs.cluster || wiring.group != nil) {
		return fmt.Errorf("the async stages' order workers run on a single Redis, not on %s", rs.component)
	}
	workers, err := startOrderWorkers(ctx, sc, rs.addrs[0], servers, workDir, log)
	if err != nil {
		return err
	}
	if workers != nil {
		defer workers.stop()
		say("%d order workers (cmd/orderworker) for %s", orderWorkerCount, strings.Join(asyncStages(sc), ", "))
	}
	followCtx, stopFollowing := context.WithCancel(ctx)
	var following sync.WaitGroup
	following.Go(func() { lv.follow(followCtx, replicaURLs) })
	defer following.Wait()
	defer stopFollowing()

	proxy, err := startProxy(ctx, o.proxy, upstreams, nginxLimit(o.frontDoor), workDir)
	if err != nil {
		return err
	}
	defer proxy.stop()
	doors.replicas, doors.proxy = replicas, proxy
	say("proxy: %s at %s", proxy.component, proxy.url)

	st := state{
		PID: os.Getpid(), WorkDir: workDir, AdminToken: o.adminToken,
		Proxy:       stateProxy{Kind: proxy.component.Kind, URL: proxy.url, PIDs: proxy.pids()},
		Redis:       stateRedis{Kind: rs.component.Kind, Addrs: rs.addrs, PIDs: wiring.pids()},
		LockServers: servers.pids(),
	}
	for _, r := range replicas {
		st.Replicas = append(st.Replicas, stateReplica{Name: r.name, URL: r.url(), PID: r.sup.pid()})
	}
	statePath := filepath.Join(o.out, "workshop.json")
	if err := writeJSON(statePath, st); err != nil {
		return err
	}
	if !o.keep {
		// Its PIDs are dead and its admin token void once the run ends.
		defer os.Remove(statePath)
	}

	say("running scenario %s", scenarioName)
	redisAddr, holdersAddr := wiring.loadgenRedis()
	redisComponent := rs.component
	if wiring.group != nil {
		redisComponent = wiring.group.component
		redisComponent.Addr = strings.Join(wiring.group.sentinelAddrs(), ",")
	}
	stores := storeview.Open(storeview.Addrs{Addr: redisAddr, Cluster: wiring.loadgenCluster(), Holders: holdersAddr})
	defer stores.Close()
	rep, runErr := loadgen.Run(ctx, loadgen.Config{
		Target:       proxy.url,
		ReplicaURLs:  replicaURLs,
		AdminToken:   o.adminToken,
		Stores:       stores,
		FrontDoors:   doors,
		Injector:     &injector{replicas: replicas, redis: rs, group: wiring.group, links: wiring.links, lockServers: servers, workers: workers},
		Redis:        redisComponent,
		Proxy:        proxy.component,
		Orders:       servers.orders(),
		Shop:         shoprules.Shop(),
		Scenario:     sc,
		ScenarioFile: scenarioName,
		Progress:     stderr,
		Interactive:  progress.IsTerminal(stderr),
		Processes: func() map[string][]int {
			m := servers.pids()
			m["shop"], m["redis"] = nil, wiring.pids()
			for _, r := range replicas {
				if pid := r.sup.pid(); pid != 0 {
					m["shop"] = append(m["shop"], pid)
				}
			}
			if pids := proxy.pids(); pids != nil {
				m["nginx"] = pids
			}
			if workers != nil {
				m["orderworker"] = workers.pids()
			}
			return m
		},
		Watch:      lv,
		TraceSales: true,
		Logger:     log,
	})
	if rep != nil {
		if err := report.Publish(rep, o.out, stdout); err != nil {
			return errors.Join(runErr, err)
		}
	}
	reportPath, _ := filepath.Abs(filepath.Join(o.out, "report.html"))
	lv.finish(rep, reportPath, runErr)
	for _, r := range replicas {
		if n := r.sup.restartCount(); n > 0 {
			say("%s was restarted %d time(s) (crash steps and the crash scenario end a replica on purpose)", r.name, n)
		}
	}
	if runErr != nil {
		return runErr
	}
	if o.keep {
		say("%s", keepHint(proxy.url, o.adminToken, statePath, lv.url))
		select {
		case <-enters:
			say("Enter: stopping every process it started")
		case <-ctx.Done():
		}
	}
	if rep == nil {
		return nil
	}
	return rep.Verdict()
}

// keepHint is what a --keep run prints once its stages ran: how to end
// it, and commands to try, each of which works as printed (the stages sold
// their stock, so the naive stage is restocked before it sells again).
func keepHint(proxyURL, adminToken, statePath, liveURL string) string {
	return fmt.Sprintf(`still running; press Enter to stop everything (Ctrl-C works too, and exits 130). Try:
  curl -s %[1]s/api/stages
  curl -s -XPOST -H 'Authorization: Bearer %[2]s' -d '{"stock":100}' %[1]s/api/stages/naive/reset
  curl -s -XPOST '%[1]s/api/stages/naive/deduct?sku=sku-1'
  curl -s '%[1]s/api/stages/naive/audit?sku=sku-1'
  admin token: %[2]s (see %[3]s)
  live page: %[4]s`, proxyURL, adminToken, statePath, liveURL)
}

// readEnters passes each Enter on the terminal on to whoever waits for one
// then (a stage in step mode, the end of a --keep run); an Enter nobody
// waits for is dropped, so none runs a stage ahead. Its goroutine returns
// at the end of input; a workshop whose input stays open leaves it blocked
// in its read when it exits, as nothing can interrupt a read of standard
// input.
func readEnters(in io.Reader) <-chan struct{} {
	enters := make(chan struct{})
	go func() {
		lines := bufio.NewScanner(in)
		for lines.Scan() {
			select {
			case enters <- struct{}{}:
			default:
			}
		}
	}()
	return enters
}

// loadScenario loads --scenario, keeping the runs of the --only stages;
// a stage no shop has is a usage error before anything starts.
func loadScenario(o options) (*plan.Scenario, string, error) {
	sc, name, err := scenarios.Load(o.scenario)
	if err != nil {
		return nil, "", flagenv.Usage(err)
	}
	if o.only != "" {
		if err := sc.Only(flagenv.List(o.only)); err != nil {
			return nil, "", flagenv.Usage(err)
		}
	}
	if err := loadgen.CheckStages(sc, inventory.StageIDs()); err != nil {
		return nil, "", flagenv.Usage(err)
	}
	for _, run := range sc.Runs {
		if run.FrontDoor != nil && run.FrontDoor.Limiter == plan.LimitNginx && o.proxy == proxyGo {
			return nil, "", flagenv.Usage(fmt.Errorf("scenario %s: a run's front_door is limit-nginx: %w (--proxy go)", name, errNginxNeeded))
		}
	}
	return sc, name, nil
}

func randomToken() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b) // crypto/rand.Read never fails on Linux
	return hex.EncodeToString(b)
}

func writeJSON(path string, v any) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("encode %s: %w", path, err)
	}
	if err := os.WriteFile(path, append(data, '\n'), 0o644); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
