# Build, test and run the bulk import service. `make help` lists the targets.
#
# Everything local lives in .local/ (git-ignored): the PostgreSQL and Redis
# data of deploy/local/stack.sh, generated secrets, documents and tools.
# Set DATABASE_URL and REDIS_URL to use servers of your own instead; the
# tests read TEST_DATABASE_URL and TEST_REDIS_URL (never DATABASE_URL and
# REDIS_URL), so that a shell pointed at a real server does not test on it.

SHELL := bash
.SHELLFLAGS := -euo pipefail -c
# Each recipe runs in one shell, so a recipe can set variables for its later
# lines and `exec` at the end.
.ONESHELL:
.DEFAULT_GOAL := help
MAKEFLAGS += --no-builtin-rules --no-print-directory

GO ?= go
LOCAL := $(CURDIR)/.local
LOCAL_BIN := $(LOCAL)/bin
STACK := deploy/local/stack.sh
FUZZTIME ?= 30s
BENCHCOUNT ?= 2

# staticcheck 2026.1.2; installed into .local/bin, not into the user's GOBIN.
STATICCHECK_VERSION := v0.8.2
STATICCHECK := $(LOCAL_BIN)/staticcheck
STATICCHECK_STAMP := $(LOCAL_BIN)/.staticcheck-$(STATICCHECK_VERSION)

.PHONY: help run test test-long chaos chaos-network scale soak check-ports stack-up stack-down env build install lint bench bench-migrate fuzz

# test-env starts nothing and uses TEST_DATABASE_URL and TEST_REDIS_URL when
# both are set; otherwise it starts the local stack and points them at it. It
# then unsets DATABASE_URL and REDIS_URL for the tests.
define test-env
export DATABASE_URL="$${TEST_DATABASE_URL:-}" REDIS_URL="$${TEST_REDIS_URL:-}"
$(STACK) up
eval "$$($(STACK) env)"
export TEST_DATABASE_URL="$$DATABASE_URL" TEST_REDIS_URL="$$REDIS_URL"
unset DATABASE_URL REDIS_URL IMPORTCTL_API_KEY
endef

# long-tests prints the tests that skip themselves under -short (the Test
# functions that call testing.Short) as a -run pattern: A|B|C.
define long-tests
find . \( -path ./.local -o -path ./bin -o -path ./.git \) -prune -o -name '*_test.go' -print0 |
	xargs -0 awk 'FNR == 1 || /^func / { name = "" } /^func Test/ { name = $$2; sub(/\(.*/, "", name) } /testing\.Short\(\)/ && name != "" { print name; name = "" }' |
	sort -u | paste -sd'|'
endef

help: ## List the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{ printf "  %-11s %s\n", $$1, $$2 }'

# A cold build (empty module and build caches) downloads the modules and
# compiles about 700 packages (with the standard library): 5 to 8 minutes on 2 cores. `go build -v`
# names each package as it compiles it, so the wait shows progress; a warm
# build prints the two commands only.
build: ## Build bin/importd and bin/importctl
	@mkdir -p bin
	if [[ ! -d "$$($(GO) env GOMODCACHE)/github.com/gin-gonic" ]]; then
		echo "build: downloading modules (first build only: about a minute)"
		$(GO) mod download
	fi
	echo "build: compiling bin/importd and bin/importctl (the first build compiles about 700 packages: 5-8 minutes on 2 cores; later builds take seconds)"
	start=$$SECONDS
	$(GO) build -v -o bin/ ./cmd/importd ./cmd/importctl 2>&1 | awk '{ n++; printf "build: [%3d] %s\n", n, $$0; fflush() }'
	echo "build: done in $$((SECONDS - start))s"

install: build ## Copy bin/importd and bin/importctl into GOBIN (default: $(go env GOPATH)/bin) and say whether it is on the PATH
	@dir=$$($(GO) env GOBIN)
	dir=$${dir:-$$($(GO) env GOPATH)/bin}
	mkdir -p "$$dir"
	install -m 0755 bin/importd bin/importctl "$$dir/"
	echo "install: importd and importctl are in $$dir"
	case ":$$PATH:" in
	*":$$dir:"*) ;;
	*) echo "install: $$dir is not on your PATH; add it with: export PATH=\"$$dir:\$$PATH\"" ;;
	esac

check-ports: ## Fail when a port make run listens on is taken (HTTP_ADDR, VENDOR_SIM_ADDR, STACK_PG_PORT, ...), naming the variable that moves it
	@$(STACK) check-ports

stack-up: ## Start the local PostgreSQL and Redis (installs them with apt when missing)
	$(STACK) up

stack-down: ## Stop the local PostgreSQL and Redis (their data stays in .local/)
	$(STACK) down

env: ## Print export lines for importctl against the local stack (with the demo's API key once make run made it; no server secret): eval "$$(make -s env)"
	@$(STACK) env importctl

test: ## Run the tests except the long ones (-short), with the race detector, against the local stack
	$(test-env)
	$(STACK) chromium
	$(STACK) promtool
	$(GO) test -race -short -timeout 30m ./...

test-long: ## Run the long tests that `make test` skips (a million rows, memory bounds)
	$(test-env)
	long=$$($(long-tests))
	if [[ -z "$$long" ]]; then
		echo "test-long: no test calls testing.Short"
		exit 0
	fi
	echo "test-long: $$long"
	$(GO) test -race -timeout 30m -run "^($$long)\$$" ./...

chaos: ## Faults over the whole pipeline: importctl run over 10,000 accounts with businesses while workers (50), the API, the runner, Redis and PostgreSQL are killed or restarted (CHAOS_ACCOUNTS, CHAOS_WORKER_KILLS, CHAOS_BUSINESSES, CHAOS_CONCURRENCY)
	# The test starts a PostgreSQL, a Redis, the vendor simulators and the
	# importd processes of its own, and runs the built importctl; test-env
	# only installs the servers when missing.
	$(test-env)
	$(GO) test -tags chaos -run '^TestChaos_Full$$' -count 1 -v -timeout 70m ./cmd/importd

chaos-network: ## Network faults over the whole pipeline: toxiproxy between importd and PostgreSQL and Redis, latency, bandwidth, resets, blackholes, outages (CHAOS_NETWORK_ACCOUNTS, CHAOS_NETWORK_FAULTS)
	$(test-env)
	$(GO) test -tags chaos -run '^TestChaos_Network$$' -count 1 -v -timeout 60m ./cmd/importd

scale: ## The production topology under failovers: 2 API replicas behind HAProxy, 3 workers, Redis Cluster (then Sentinel), PostgreSQL with a standby; 10,000 accounts through importctl run while replicas die and the stores fail over (SCALE_ACCOUNTS, SCALE_BUSINESSES, SCALE_CONCURRENCY)
	# The test starts the servers of its own (six redis-server for the
	# cluster; a primary, a replica and three Sentinels for the second pass; a PostgreSQL
	# primary and standby, HAProxy); test-env and haproxy only install
	# them when missing.
	$(test-env)
	$(STACK) haproxy
	$(GO) test -tags scale -run '^TestScale_Full$$' -count 1 -v -timeout 120m ./cmd/importd

SOAK_ACCOUNTS ?= 200000
SOAK_REPORT ?= $(LOCAL)/soak
soak: ## A long run at size: SOAK_ACCOUNTS (default 200,000) through importctl run, one API and two workers, sampled every 10% into SOAK_REPORT/soak.csv (docs/performance.md, "Soak")
	# The test starts a PostgreSQL, a Redis, the vendor simulator and the
	# importd processes of its own, and runs the built importctl; test-env
	# only installs the servers when missing. SOAK_CONCURRENCY (default 16)
	# is the runner's --concurrency; SOAK_HOURS (default 12) bounds the run.
	$(test-env)
	export SOAK_ACCOUNTS="$(SOAK_ACCOUNTS)" SOAK_REPORT="$(abspath $(SOAK_REPORT))"
	mkdir -p "$$SOAK_REPORT"
	$(GO) test -tags soak -run '^TestSoak_Full$$' -count 1 -v -timeout 24h ./cmd/importd 2>&1 | tee "$$SOAK_REPORT/soak.log"

# The local defaults below keep their secrets in .local/, readable by the
# owner alone, so that restarts keep tokens and dashboard logins valid.
# check-ports comes first: a busy port is reported before anything is
# started, built or provisioned.
run: check-ports stack-up build ## Run importd serve locally with demo data (prints an API key and a curl example)
	@eval "$$($(STACK) env)"
	mkdir -p "$(LOCAL)"
	secret() { # secret FILE: print FILE, creating it with 32 random bytes in hex first
		if [[ ! -s "$$1" ]]; then
			(umask 077 && head -c 32 /dev/urandom | od -An -vtx1 | tr -d ' \n' >"$$1")
		fi
		chmod 600 "$$1"
		cat "$$1"
	}
	export TOKEN_SECRET="$${TOKEN_SECRET:-$$(secret "$(LOCAL)/token_secret")}"
	export MONITORING_USER="$${MONITORING_USER:-admin}"
	export MONITORING_PASSWORD="$${MONITORING_PASSWORD:-$$(secret "$(LOCAL)/monitoring_password")}"
	export DOCUMENTS_URL="$${DOCUMENTS_URL:-file://$(LOCAL)/documents}"
	export HTTP_ADDR="$${HTTP_ADDR:-127.0.0.1:8080}"
	# The memory limit that docker-compose.yml gives its containers (1 GiB):
	# importd keeps its Go heap under 90% of it (GOMEMLIMIT, when set, wins),
	# so that the garbage of a burst of large requests is collected rather
	# than left to grow the process (docs/operating.md, "Memory").
	export MEMORY_LIMIT="$${MEMORY_LIMIT:-1073741824}"
	mkdir -p "$(LOCAL)/documents"
	bin/importd migrate
	deploy/local/demo.sh
	exec deploy/local/serve.sh bin/importd serve

lint: $(STATICCHECK_STAMP) ## gofmt (must list nothing), go vet and staticcheck
	unformatted=$$(find . \( -path ./.local -o -path ./bin -o -path ./.git -o -name testdata \) -prune -o -name '*.go' -print | xargs -r gofmt -l)
	if [[ -n "$$unformatted" ]]; then
		echo "gofmt: these files need formatting (run gofmt -w):" >&2
		echo "$$unformatted" >&2
		exit 1
	fi
	$(GO) vet ./...
	$(STATICCHECK) ./...

$(STATICCHECK_STAMP):
	mkdir -p "$(LOCAL_BIN)"
	GOBIN="$(LOCAL_BIN)" $(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)
	rm -f "$(LOCAL_BIN)"/.staticcheck-*
	touch "$@"

bench: ## Run the performance benchmarks (docs/performance.md), each beside its baseline in the same run, on durable databases (BENCHCOUNT=2; BENCH_DURABILITY=tuned for synchronous_commit=off)
	$(test-env)
	# Every benchmark's database keeps PostgreSQL's durable defaults, as users
	# run it, and each benchmark prints its mode; BENCH_DURABILITY=tuned runs
	# them with synchronous_commit=off, for comparison (db/dbtest).
	# E3 and E4 over HTTP at concurrency 16, against a bare Gin handler and a
	# plain SQL upsert of the same 4 KB payloads, from Go and from pgbench.
	$(GO) test ./cmd/importd -run '^$$' -bench 'E3|E4' -benchtime 1500x -count $(BENCHCOUNT)
	# Account creation at concurrency 1 and 32: the creation statement run by
	# pgbench (PostgreSQL's own speed), the creation statement alone from Go
	# (baseline) and the worker's creation function called directly, with
	# direct's ratio to each.
	$(GO) test ./jobs/creation -run '^$$' -bench '^BenchmarkCreate$$' -benchtime 1000x -count $(BENCHCOUNT)
	# E5 at concurrency 1 and 32: the worker's creation function called
	# directly, and E5 end to end (HTTP, queue, worker, wait) with its ratio
	# to direct creation and, at concurrency 1, the p50 the queue adds
	# (queue-p50-ms). A profile: add -cpuprofile e5.prof and read it with go
	# tool pprof; E5_WAITS=1 prints what PostgreSQL's backends waited on
	# during each phase, and E5_STATEMENTS=1 its statements
	# (pg_stat_statements). Other settings (of both benchmarks): E5_LEVELS
	# (concurrencies), E5_WRITERS and E5_BATCH (ACCOUNT_WRITERS,
	# ACCOUNT_BATCH), E5_DB_CONNS (DB_MAX_CONNS, 8) and E5_WORKER_CONCURRENCY.
	$(GO) test ./cmd/importd -run '^$$' -bench '^BenchmarkE5$$' -benchtime 1000x -count $(BENCHCOUNT)
	# E7: 100 accounts x 100 transactions, against a plain multi-row insert;
	# E8 and E6 the same with statements and notes. SideBySide alternates
	# each with its plain insert account by account and reports the ratio.
	$(GO) test ./jobs/postimport -run '^$$' -bench 'Transactions|Statements|Notes|SideBySide' -benchtime 5x -count $(BENCHCOUNT)
	# The validator alone, without HTTP or PostgreSQL.
	$(GO) test ./jobs/account -run '^$$' -bench . -benchmem -count $(BENCHCOUNT)

fuzz: ## Run each Fuzz target for FUZZTIME (default 30s): make fuzz FUZZTIME=5m
	$(test-env)
	# `go test -list` prints a package's matching names, then its "ok" line.
	targets=$$($(GO) test -list '^Fuzz' ./... | awk '/^Fuzz/ { f[n++] = $$1; next } /^ok/ { for (i = 0; i < n; i++) print $$2, f[i]; n = 0 }')
	if [[ -z "$$targets" ]]; then
		echo "fuzz: no Fuzz targets found"
		exit 0
	fi
	while read -r pkg name; do
		echo "fuzz: $$pkg $$name for $(FUZZTIME)"
		$(GO) test -run '^$$' -fuzz "^$$name\$$" -fuzztime "$(FUZZTIME)" "$$pkg" </dev/null
	done <<<"$$targets"

N ?= 10000
bench-migrate: ## The migration runner end to end over HTTP (stage, process, notes, ten transactions, one statement) beside direct creation, with the CPU per account of PostgreSQL, importd and Redis, on a durable database (BENCH_DURABILITY=tuned for synchronous_commit=off): make bench-migrate N=10000
	$(test-env)
	$(GO) test ./cmd/importctl/migrate -run '^$$' -bench '^BenchmarkMigrate$$' -benchtime $(N)x -count 1 -timeout 60m
