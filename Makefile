# fixpoint: the two quick-start commands are `make demo` and `make test`.
GO ?= go
PKGS ?= ./...

.PHONY: demo test test-short bench soak fuzz vet build services docs

## demo: a demo batch of 3,000 support tickets end to end on the simulator
demo:
	$(GO) run ./cmd/worker demo

## test: every unit and integration test (needs Postgres and NATS, see .ci/run)
test: vet
	$(GO) test -race -count=1 -timeout 20m $(PKGS)

## test-short: unit tests only, no services
test-short:
	$(GO) test -short -count=1 $(PKGS)

vet:
	@unformatted=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$unformatted" ]; then echo "gofmt would change: $$unformatted"; exit 1; fi
	$(GO) vet $(PKGS)

build:
	$(GO) build -o bin/ ./cmd/...

## bench: micro-benchmarks of every package, then the end-to-end figures
bench:
	$(GO) test -run '^$$' -bench . -benchmem $(PKGS)
	$(GO) run ./cmd/fixpoint-bench

## soak: the integration and fault-injection suite ten times over, under -race
soak:
	$(GO) test -race -count=10 -timeout 90m ./pipeline/

## fuzz: a minute of fuzzing per target
fuzz:
	for t in FuzzExtract FuzzRepairText; do $(GO) test -run '^$$' -fuzz "^$$t$$" -fuzztime 60s ./extract || exit 1; done
	for t in FuzzCompile FuzzValidate; do $(GO) test -run '^$$' -fuzz "^$$t$$" -fuzztime 60s ./validate || exit 1; done
	$(GO) test -run '^$$' -fuzz '^FuzzCoerce$$' -fuzztime 60s ./repair
	$(GO) test -run '^$$' -fuzz '^FuzzDecode$$' -fuzztime 60s ./llm
	$(GO) test -run '^$$' -fuzz '^FuzzDuplicateKey$$' -fuzztime 60s ./extract
	$(GO) test -run '^$$' -fuzz '^FuzzStrictSchema$$' -fuzztime 60s ./llm
	$(GO) test -run '^$$' -fuzz '^FuzzServeHTTP$$' -fuzztime 60s ./sim
	$(GO) test -run '^$$' -fuzz '^FuzzDescribeSchema$$' -fuzztime 60s ./pipeline
	$(GO) test -run '^$$' -fuzz '^FuzzCanonical$$' -fuzztime 60s ./store

## services: start the local Postgres and NATS if they are down
services:
	bash .ci/services

## docs: regenerate docs/configuration.md from the commands' --help
docs:
	$(GO) test -count=1 ./cmd/internal/configdoc -run TestConfigurationDoc -update
