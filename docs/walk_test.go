package docs

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// walk is the newcomer's walk: every command of a shell block in the user
// docs (README.md, docs/ but the benchmark history, lock/README.md), as
// written there without its comment, and every command the prose quotes
// inline (a code span that starts with go run/test/build/get, make, docker
// compose, k6 run or curl), each with either the test that runs it
// ("test TestName") or why no test does ("not run: …"). A new command in
// the docs fails TestEveryDocumentedCommandIsWalked until it is listed
// here, and a test named here must exist.
var walk = map[string]string{
	"go run ./cmd/workshop":                                       "not run: the default scenario takes 1–2 minutes on 2 loaded cores; its path runs in test TestWorkshopShowsTheArticlesTable (a shorter scenario) and its figures are the recorded run TestResultTablesMatchTheDefaultScenarioAndTheRecordedRun checks",
	"make test":                                                   "not run: it is the whole suite (CI's command); a test cannot run itself",
	"go run ./cmd/workshop --scenario async":                      "test TestAsyncWorkerFaultScenario",
	"go run ./cmd/workshop --scenario async-rate":                 "not run: a measure (minutes, figures in BENCHMARKS.md); its stages run in test TestHeldOrderWorkersWriteNothingUntilTheLoadEnds",
	"go run ./cmd/workshop --scenario payment-timeout":            "not run: its stage and sweeper run in test TestPaymentDuringLoadScenario",
	"go run ./cmd/workshop --scenario payment-during-load":        "test TestPaymentDuringLoadScenario",
	"go run ./cmd/workshop --keep --scenario payment-during-load": "not run as written: --keep is run, its hint's commands included, in test TestInterruptStopsEveryProcess",
	"k6 run -e BASE_URL=http://127.0.0.1:PORT -e ADMIN_TOKEN=TOKEN -e PAY_WITHIN=1 k6/async-pay.js":   "not run as written (PORT and TOKEN are the reader's); the script runs against the compose stack in test TestComposeOnEngine",
	"LOCKSTEP_PAY_WITHIN=1s docker compose up -d --build":                                             "test TestComposeOnEngine (needs a container engine)",
	"K6_SCRIPT=async-pay.js docker compose --profile k6 run --rm -e PAY_WITHIN=1 k6":                  "test TestComposeOnEngine (needs a container engine)",
	"K6_SCRIPT=stage-walk.js docker compose --profile k6 run --rm k6":                                 "not run as written: stage-walk.js runs against the stack in test TestLiveStack",
	"chmod -R a+rX prometheus grafana k6 deploy/nginx":                                                "not run: it changes the reader's checkout's permissions (a rootless engine's need)",
	"mkdir -p out/compose-cluster":                                                                    "test TestComposeClusterOnEngine (needs a container engine)",
	"go run ./cmd/workshop --redis cluster":                                                           "test TestWorkshopOnARedisCluster",
	"docker compose up -d --build":                                                                    "test TestComposeOnEngine (needs a container engine)",
	"docker compose --profile loadgen run --rm loadgen":                                               "test TestComposeOnEngine (needs a container engine)",
	"docker compose --profile k6 run --rm k6":                                                         "test TestComposeOnEngine (needs a container engine)",
	"docker compose down":                                                                             "test TestComposeOnEngine (needs a container engine)",
	"docker compose --profile cluster up -d --build":                                                  "test TestComposeClusterOnEngine (needs a container engine)",
	"docker compose --profile cluster run --rm cluster-loadgen":                                       "test TestComposeClusterOnEngine (needs a container engine)",
	"docker compose --profile cluster down":                                                           "test TestComposeClusterOnEngine (needs a container engine)",
	"go run ./cmd/workshop --scenario crash":                                                          "test TestFailureScenarios",
	"go run ./cmd/workshop --scenario crash,pause":                                                    "not run as written: each scenario runs in test TestFailureScenarios",
	"go build -o /tmp/locksystems ./bench/locksystems":                                                "not run: a benchmark (minutes); its table's claims run in test TestTheTableAsTheSeedsSayIt",
	"/tmp/locksystems -duration 3s -procs 3 -goroutines 8 -keys 16 -uncontended 1000":                 "not run: a benchmark (minutes); its table's claims run in test TestTheTableAsTheSeedsSayIt",
	"go run ./cmd/workshop --scenario spike-bots --lock-servers off":                                  "test TestSpikeBotsScenario (the shipped file, shorter rows)",
	"go run ./cmd/workshop --scenario spike-bots":                                                     "test TestSpikeBotsScenario (the shipped file, shorter rows; the scenario needs no lock server)",
	"go run ./bench/frontdoor -rounds 3 -round 3s":                                                    "not run: a benchmark (wrk against three shops; figures in docs/front-door.md)",
	"go run ./bench/frontdoor -rounds 5 -round 3s -shop <binary>":                                     "not run: the same benchmark against a built shop binary (figures in docs/front-door.md)",
	"go run ./cmd/workshop --scenario orders":                                                         "test TestOrdersScenario",
	"go run ./cmd/workshop --scenario orders --only semaphore,semaphore-expirable --lock-servers off": "test TestOrdersScenario (the whole scenario, with --lock-servers off among its cases)",
	"go run ./cmd/workshop --keep":                                                                    "test TestInterruptStopsEveryProcess",
	"go run ./cmd/workshop --scenario my.yaml --replicas 3 --out out/mine":                            "not run: my.yaml is the reader's own scenario",
	"go build ./cmd/workshop":                                                                         "test TestUnmetExpectationsExitWithStatus3 (the workshop built, its exit status read as the docs say)",
	"go build -o workshop ./cmd/workshop && ./workshop; echo $?":                                      "not run as written: the default scenario takes minutes; the built workshop's statuses run in tests TestUnmetExpectationsExitWithStatus3 and TestUsageErrorExitsTwo",
	"go build ./cmd/shop":                                                                             "not run as written: the workshop's tests build the shop the same way (buildBinaries), as in test TestWorkshopShowsTheArticlesTable",
	"go run ./cmd/shop --redis-cluster host1:7000,host2:7001,…":                                       "not run as written (the hosts are the reader's); shops on a Redis Cluster run in test TestWorkshopOnARedisCluster",
	"go run ./cmd/loadgen --target http://localhost:8080 --replica-urls http://shop1:8080,... --redis-addr localhost:6379 --admin-token $LOCKSTEP_ADMIN_TOKEN": "not run as written (the hosts are the reader's); the compose stack runs the loadgen in test TestComposeOnEngine",
	"go run ./cmd/workshop --lock-servers off --scenario reshard": "test TestReshardScenario",
	"go run ./cmd/workshop --scenario lock-servers":               "not run: the three lock servers' stages take minutes; their stages run in test TestLockServerStagesNeverOversell and the scenario parses in test TestShippedScenariosParse",
	"go run ./cmd/soak":                   "not run: it soaks for 30 minutes by default; its short look runs in test TestShortSoak",
	"go test -run Example ./lock/":        "not run by itself: make test runs every Example of lock/ (go test runs Examples)",
	"go test -race":                       "not run by itself: it names how make test runs the suite",
	"go test ./lock/":                     "not run by itself: make test runs it",
	"go test ./deploy":                    "not run by itself: make test runs it",
	"go test ./deploy -run TestLiveStack": "test TestLiveStack",
	"go test ./deploy -run TestLiveStack -preview grafana/preview.png":                            "not run: it rewrites the checked-in preview; test TestLiveStack runs the same stack without -preview",
	"go test ./deploy -run TestGenerated":                                                         "test TestGenerated",
	"go test -count=1 -run TestSoldOutMarkResetDuringLoad -v ./internal/httpapi":                  "test TestSoldOutMarkResetDuringLoad",
	"go test -count=1 -run TestSoldOutMarkClearedByStockBack -v ./internal/frontdoor":             "test TestSoldOutMarkClearedByStockBack",
	"go test -run XXX -bench BenchmarkRedisAllow -benchtime 20000x -count 3 ./internal/frontdoor": "not run: a measure (its figures are in docs/front-door.md)",
	"go test ./deploy -run TestGenerated -update":                                                 "not run: it rewrites the checked-in files; test TestGenerated checks them without -update",
	"go test -artifacts -outputdir DIR ./cmd/workshop":                                            "not run as written (DIR is the reader's); make test runs ./cmd/workshop",
	"go test -run '^$' -fuzz '^FuzzDeduct$' -fuzztime 10m ./internal/httpapi/":                    "not run: ten minutes of fuzzing; make test runs the same target for 4 s (make fuzz-short)",
	"make fuzz-short":                               "not run by itself: make test ends with it",
	"make fuzz-short FUZZTIME=10m":                  "not run: ten minutes per target; make test runs it at 4 s",
	"make check-lock CHECKER_TIME=10m":              "not run: ten minutes; make test runs the checker at its default budget in test TestLockChecker",
	"make mutate":                                   "not run: it runs the lock suite once per mutant (hours on 2 cores); lock/MUTANTS.md records its last score",
	"docker compose build":                          "test TestComposeOnEngine (needs a container engine)",
	"docker compose up -d --wait":                   "test TestComposeOnEngine (needs a container engine)",
	"docker compose --profile cluster up -d --wait": "test TestComposeClusterOnEngine (needs a container engine)",
	"curl -d": "not run: it names curl's form encoding, whose 415 runs in test TestSaleBody",
	"go test -run '^$' -bench BenchmarkAsyncAdmit -benchtime 9x ./inventory/":   "not run: a measure (its figures are in BENCHMARKS.md)",
	"go test -race -run TestLockServerStagesRecoverFromALinkFault ./inventory/": "test TestLockServerStagesRecoverFromALinkFault",
	"go run ./cmd/workshop --scenario orders-down":                              "test TestOrdersDownScenario",
	"go test -race -count 3 -run TestPaymentDuringLoadScenario ./cmd/workshop/": "test TestPaymentDuringLoadScenario (once; -count 3 is the docs' repeat)",
	"go run ./cmd/soak --duration 1m --idempotency-ttl 5s --sample 1s":          "test TestShortSoak",
	"go run ./cmd/workshop --scenario pause --only etcd,zookeeper":              "test TestFailureScenarios (the pause scenario, every stage)",
	"make deps": "not run by itself: make test runs it first",
	"go test ./deploy -run TestComposeAgainstImageFacts": "test TestComposeAgainstImageFacts",
	"go get github.com/lockstep/lockstep/lock":           "not run: it fetches the published module; the package's examples run in test TestMain of lock/ (go test runs every Example)",
}

var (
	shellFence = regexp.MustCompile("^\\s*```(sh|bash|shell)\\s*$")
	endFence   = regexp.MustCompile("^\\s*```\\s*$")
	testName   = regexp.MustCompile(`\btest (Test\w+)`)
	// proseCommand is a code span of the prose that quotes a command; a
	// span may wrap at the end of a line, as Markdown lets it.
	proseCommand = regexp.MustCompile("`((?:go (?:run|test|build|get) |make |docker compose |k6 run |curl )[^`]*)`")
)

// documentedCommands are the commands of the shell blocks of the user docs.
func documentedCommands(t *testing.T) map[string]string {
	t.Helper()
	pages := []string{filepath.Join(repo, "README.md"), filepath.Join(repo, "lock", "README.md")}
	docs, err := filepath.Glob(filepath.Join(repo, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range docs {
		if filepath.Base(p) != "benchmarks-history.md" {
			pages = append(pages, p)
		}
	}
	found := map[string]string{}
	for _, page := range pages {
		data, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		var prose strings.Builder
		in := false
		for _, line := range strings.Split(string(data), "\n") {
			switch {
			case !in && shellFence.MatchString(line):
				in = true
			case in && endFence.MatchString(line):
				in = false
			case in:
				cmd, _, _ := strings.Cut(line, " #")
				if cmd = strings.TrimSpace(cmd); cmd != "" && !strings.HasPrefix(cmd, "#") {
					found[cmd] = page
				}
			default:
				prose.WriteString(line + "\n")
			}
		}
		for _, m := range proseCommand.FindAllStringSubmatch(prose.String(), -1) {
			found[strings.Join(strings.Fields(m[1]), " ")] = page
		}
	}
	return found
}

func TestEveryDocumentedCommandIsWalked(t *testing.T) {
	documented := documentedCommands(t)
	for cmd, page := range documented {
		if _, ok := walk[cmd]; !ok {
			t.Errorf("%s: %q is neither run by a test nor listed as not run (add it to walk in docs/walk_test.go)", page, cmd)
		}
	}
	var sources strings.Builder
	err := filepath.WalkDir(repo, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && strings.HasPrefix(d.Name(), ".") && path != repo {
			return filepath.SkipDir
		}
		if strings.HasSuffix(path, "_test.go") {
			data, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			sources.Write(data)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for cmd, how := range walk {
		if _, ok := documented[cmd]; !ok {
			t.Errorf("walk lists %q, which no user doc shows any more", cmd)
		}
		if !strings.HasPrefix(how, "test ") && !strings.HasPrefix(how, "not run") {
			t.Errorf("%q: %q says neither which test runs it nor why none does", cmd, how)
		}
		for _, m := range testName.FindAllStringSubmatch(how, -1) {
			if !strings.Contains(sources.String(), "func "+m[1]+"(") {
				t.Errorf("%q: test %s does not exist", cmd, m[1])
			}
		}
	}
}
