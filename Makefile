GO ?= go

.PHONY: test deps vet bench

ARTIFACTS ?= $(CURDIR)/out/test-artifacts

# The test command: installs what the suite needs, then runs every test with
# the race detector. Test artifacts (the workshop report, its screenshot)
# land in $(ARTIFACTS). The peer-lock comparison is a module of its own.
test: deps vet
	@mkdir -p $(ARTIFACTS)
	$(GO) test -race -count=1 -timeout 12m -artifacts -outputdir $(ARTIFACTS) ./...
	cd bench/peers && $(GO) test -race -count=1 ./...

deps:
	@bash scripts/install-deps.sh

vet:
	$(GO) vet ./...

# Library benchmarks (see BENCHMARKS.md for the recorded figures).
bench: deps
	$(GO) test -run '^$$' -bench . -benchtime 3s ./lock/
