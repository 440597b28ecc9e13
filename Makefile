GO ?= go

.PHONY: test deps vet bench bench-shop fuzz-short check-lock check-orders mutate mutate-orders

ARTIFACTS ?= $(CURDIR)/out/test-artifacts

# The test command: installs what the suite needs, then runs every test with
# the race detector (the order checker for its short default; its proof,
# a checker run per planted defect, only in check-orders). Test artifacts (the workshop report, its screenshot)
# land in $(ARTIFACTS). The peer-lock comparison is a module of its own.
# deploy's engine test (docker compose on a Docker engine) builds its
# stand-in images the first time, several minutes; /var/cache/lockstep
# keeps them, and is what a CI cache should keep.
test: deps vet
	@mkdir -p $(ARTIFACTS)
	$(GO) test -race -count=1 -timeout 30m -skip '^TestOrderCheckerFindsDefects$$' -artifacts -outputdir $(ARTIFACTS) ./...
	cd bench/peers && $(GO) test -race -count=1 ./...
	@$(MAKE) --no-print-directory fuzz-short

deps:
	@bash scripts/install-deps.sh

vet:
	$(GO) vet ./...
	@unformatted="$$(gofmt -l .)"; if [ -n "$$unformatted" ]; then echo "gofmt -l: not formatted:"; echo "$$unformatted"; exit 1; fi

# Library benchmarks (see BENCHMARKS.md for the recorded figures).
bench: deps
	$(GO) test -run '^$$' -bench . -benchtime 3s ./lock/

# One shop's CPU per sale under wrk, direct and through nginx, with the
# ratios to /healthz (bench/shopcpu); SHOPCPU_ARGS='-profile DIR' adds a
# CPU profile of each workload.
SHOPCPU_ARGS ?= -rounds 3 -round 3s
bench-shop: deps
	$(GO) run ./bench/shopcpu $(SHOPCPU_ARGS)

# Fuzzes each parser for FUZZTIME (their seed corpora in testdata/fuzz/ run
# with every go test). Longer, by hand: make fuzz-short FUZZTIME=10m, or one
# target: go test -run '^$$' -fuzz '^FuzzDeduct$$' -fuzztime 10m ./internal/httpapi/
FUZZTIME ?= 4s
FUZZ_TARGETS = internal/httpapi:FuzzDeduct internal/httpapi:FuzzIdempotencyKey \
	internal/httpapi:FuzzResetBody internal/httpapi:FuzzFaultsBody internal/loadgen:FuzzParseScenario
fuzz-short: deps
	@for target in $(FUZZ_TARGETS); do \
		pkg=$${target%%:*}; name=$${target#*:}; \
		echo "fuzz $$name ($$pkg) for $(FUZZTIME)"; \
		$(GO) test -run '^$$' -fuzz "^$$name\$$" -fuzztime $(FUZZTIME) ./$$pkg/ || exit 1; \
	done

# The lock library's randomized fault checker (lock/checker_test.go) for
# CHECKER_TIME; make test runs it for its short default. A failure prints its
# seed: make check-lock CHECKER_SEED=N CHECKER_TIME=1m runs it again.
CHECKER_TIME ?= 10m
CHECKER_SEED ?= 0
check-lock: deps
	$(GO) test -race -count=1 -timeout 0 -run '^TestLockChecker$$' ./lock/ -checker.time $(CHECKER_TIME) -checker.seed $(CHECKER_SEED)

# The order half's randomized fault checker (internal/orderchecker): two
# shops and two order workers under cut replies, delays, stalls, resets,
# kills and restarts, for CHECKER_TIME of sales (CHECKER_SEED 0: a new
# seed), then its proof: each planted defect found at its seed. make test
# runs the checker for its short default. A failure prints its seed.
check-orders: deps
	$(GO) test -race -count=1 -timeout 0 -run '^TestOrderChecker$$|^TestOrderCheckerFindsDefects$$' ./internal/orderchecker/ -checker.time $(CHECKER_TIME) -checker.seed $(CHECKER_SEED)

# Mutation testing of lock/ (not part of make test; 15 minutes here):
# each mutant of lock/mutants.txt alone against go test ./lock/, each kill
# confirmed by its test failing again alone, then the score with the flaky,
# timed-out and surviving mutants apart (lock/MUTANTS.md says why they stand).
# The checker's own proof test applies mutations of its own and is left out. One mutant:
# make mutate MUTATE_ARGS='-run u04'. The two Cluster slot-movement tests
# are left out: no mutant touches what they test, and on a loaded machine
# they fail now and then, which would stop the run at its baseline. The
# lock checker runs with one seed (LOCK_CHECKER_SEED, 9), the same faults
# for every mutant.
MUTATE_PARALLEL ?= 2
MUTATE_TESTARGS ?= -skip=^(TestWaitersFollowTheirSlot|TestLocksWorkWhileTheirSlotMigrates|TestLockCheckerFindsDefects)$$
mutate: deps
	LOCK_CHECKER_SEED=$${LOCK_CHECKER_SEED:-9} $(GO) run ./internal/mutate -parallel $(MUTATE_PARALLEL) -testargs '$(MUTATE_TESTARGS)' $(MUTATE_ARGS)

# Mutation testing of the order half (orders/mutants.txt, issue 33): each
# mutant alone against the tests of orders/, asyncorders/ and inventory/
# (go test takes the packages of -testargs and -pkg together; -first ''
# since those packages have no TestScript stage of their own).
mutate-orders: deps
	$(GO) run ./internal/mutate -list orders/mutants.txt -first '' -parallel $(MUTATE_PARALLEL) -testargs './orders/ ./asyncorders/' -pkg ./inventory/ $(MUTATE_ARGS)
