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
// written there without its comment, and either the test that runs it
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
	"k6 run -e BASE_URL=http://127.0.0.1:PORT -e ADMIN_TOKEN=TOKEN -e PAY_WITHIN=1 k6/async-pay.js": "not run as written (PORT and TOKEN are the reader's); the script runs against the compose stack in test TestComposeOnEngine",
	"LOCKSTEP_PAY_WITHIN=1s docker compose up -d --build":                                           "test TestComposeOnEngine (needs a container engine)",
	"K6_SCRIPT=async-pay.js docker compose --profile k6 run --rm -e PAY_WITHIN=1 k6":                "test TestComposeOnEngine (needs a container engine)",
	"K6_SCRIPT=stage-walk.js docker compose --profile k6 run --rm k6":                               "not run as written: stage-walk.js runs against the stack in test TestLiveStack",
	"chmod -R a+rX prometheus grafana k6 deploy/nginx":                                              "not run: it changes the reader's checkout's permissions (a rootless engine's need)",
	"mkdir -p out/compose-cluster":                                                                  "test TestComposeClusterOnEngine (needs a container engine)",
	"go run ./cmd/workshop --redis cluster":                                                         "test TestWorkshopOnARedisCluster",
	"docker compose up -d --build":                                                                  "test TestComposeOnEngine (needs a container engine)",
	"docker compose --profile loadgen run --rm loadgen":                                             "test TestComposeOnEngine (needs a container engine)",
	"docker compose --profile k6 run --rm k6":                                                       "test TestComposeOnEngine (needs a container engine)",
	"docker compose down":                                                                           "test TestComposeOnEngine (needs a container engine)",
	"docker compose --profile cluster up -d --build":                                                "test TestComposeClusterOnEngine (needs a container engine)",
	"docker compose --profile cluster run --rm cluster-loadgen":                                     "test TestComposeClusterOnEngine (needs a container engine)",
	"docker compose --profile cluster down":                                                         "test TestComposeClusterOnEngine (needs a container engine)",
	"go run ./cmd/workshop --scenario crash":                                                        "test TestFailureScenarios",
	"go run ./cmd/workshop --scenario crash,pause":                                                  "not run as written: each scenario runs in test TestFailureScenarios",
	"go build -o /tmp/locksystems ./bench/locksystems":                                              "not run: a benchmark (minutes); its table's claims run in test TestTheTableAsTheSeedsSayIt",
	"/tmp/locksystems -duration 3s -procs 3 -goroutines 8 -keys 16 -uncontended 1000":               "not run: a benchmark (minutes); its table's claims run in test TestTheTableAsTheSeedsSayIt",
	"go run ./cmd/workshop --scenario orders":                                                       "test TestOrdersScenario",
	"go run ./cmd/workshop --keep":                                                                  "test TestInterruptStopsEveryProcess",
	"go run ./cmd/workshop --scenario my.yaml --replicas 3 --out out/mine":                          "not run: my.yaml is the reader's own scenario",
	"go get github.com/lockstep/lockstep/lock":                                                      "not run: it fetches the published module; the package's examples run in test TestMain of lock/ (go test runs every Example)",
}

var (
	shellFence = regexp.MustCompile("^\\s*```(sh|bash|shell)\\s*$")
	endFence   = regexp.MustCompile("^\\s*```\\s*$")
	testName   = regexp.MustCompile(`\btest (Test\w+)`)
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
			}
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
