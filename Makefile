# OmniRoute for Django. `make run` serves the demo; `make test` runs every check.
VENV ?= .venv
PY := $(VENV)/bin/python
HOST := $(or $(OMNIROUTE_HOST),127.0.0.1)
PORT := $(or $(OMNIROUTE_PORT),8000)
FAKE_PORT := $(or $(OMNIROUTE_FAKE_UPSTREAM_PORT),8100)
PYTEST_ARGS ?=

.PHONY: run test lint bench bench-more bench-paired bench-inprocess profile availability soak soak-short chaos chaos-short install browser clean fuzz

$(VENV)/.installed: pyproject.toml
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $@

install: $(VENV)/.installed

# The browser test drives Debian's Chromium through its ChromeDriver. Installed when missing
# (root and Debian's package registry needed); without them that test skips, or fails when CI=true.
browser:
	@command -v chromedriver >/dev/null 2>&1 || { \
	  echo "installing chromium and chromium-driver (for the browser test)"; \
	  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver) >/dev/null \
	  || echo "chromium could not be installed: the browser test will skip (and fail when CI=true)"; }

# The demo runs with debug on. Its keys, freshly generated once, live in data/dev.env (mode 0600,
# kept across runs), which manage.py and the ASGI app read too, so every manage.py command in
# the README and docs/ works in a plain shell afterwards; a deployment has no such file, sets
# OMNIROUTE_SECRET_KEY and OMNIROUTE_ENCRYPTION_KEY and leaves OMNIROUTE_DEBUG off
# (docs/configuration.md).
# Ctrl-C (SIGINT to the whole process group) or SIGTERM to it: the gateway stops itself and exits
# 0, this shell ignores the signal and waits for it, then stops the fake upstream (a background
# job, so deaf to Ctrl-C) and waits for it too. The recipe ends with the gateway's exit status.
run: export OMNIROUTE_DEBUG ?= 1
run: $(VENV)/.installed
	$(PY) -m omniroute.devenv
	$(PY) manage.py migrate --noinput
	$(PY) manage.py collectstatic --noinput -v 0
	$(PY) manage.py seeddemo --upstream-url http://127.0.0.1:$(FAKE_PORT)/v1 --gateway-url http://$(HOST):$(PORT)
	@set -e; \
	$(PY) manage.py fakeupstream --host 127.0.0.1 --port $(FAKE_PORT) --chunk-interval-ms 40 --no-record & fake=$$!; \
	trap 'kill $$fake 2>/dev/null || :; wait $$fake 2>/dev/null || :' EXIT; \
	trap : INT TERM; \
	$(PY) manage.py serve --host $(HOST) --port $(PORT) --no-collectstatic

# The checks and the suite load the test settings (a throwaway secret key; see pyproject.toml).
lint test: export DJANGO_SETTINGS_MODULE = omniroute.settings_test
lint: $(VENV)/.installed
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy .
	$(PY) manage.py makemigrations --check --dry-run

test: lint browser
	$(VENV)/bin/pytest $(PYTEST_ARGS)

# The load tools run on this machine like the demo (debug on); the gateways they start set
# their own keys.
bench bench-more bench-paired bench-inprocess profile availability soak soak-short chaos chaos-short: export OMNIROUTE_DEBUG ?= 1
bench: $(VENV)/.installed
	$(PY) manage.py bench

# Only the scale, prompt and concurrency phases, appended to BENCHMARKS.md.
bench-more: $(VENV)/.installed
	$(PY) manage.py bench --only scale,prompt,concurrency --record

# Gateway CPU per request of BASE (another checkout with its own .venv, e.g. a git worktree of
# the commit before a change) against this checkout (or AFTER), paired: both gateways side by
# side, 3 s runs alternating, ROUNDS (10) per mode and concurrency, an A/A twin of the after
# side for the noise. OUT=file also writes the Markdown report there; CEILING=1 also runs this
# checkout's bare proxy (the framework's ceiling) in the same rounds. BASE_SERVE="--server
# uvicorn" (or "--workers 2") serves the before side another way; SHARED_STATE=1 runs every side
# on a fresh PostgreSQL database and Redis key prefix of its own (127.0.0.1's, removed at the
# end), which several workers need. CONCURRENCY=16,64 picks the client counts (1,16).
bench-paired: $(VENV)/.installed
	@test -n "$(BASE)" || { echo "usage: make bench-paired BASE=<checkout> [AFTER=<checkout>] [BASE_ENV=NAME=VALUE] [BASE_SERVE='serve options'] [SHARED_STATE=1] [CONCURRENCY=1,16] [ROUNDS=10] [OUT=file.md] [CEILING=1]"; exit 2; }
	$(PY) manage.py benchpair --base $(BASE) $(if $(AFTER),--after $(AFTER)) $(foreach v,$(BASE_ENV),--base-env $(v)) $(if $(BASE_SERVE),--base-serve "$(BASE_SERVE)") $(if $(SHARED_STATE),--shared-state) $(if $(CONCURRENCY),--concurrency $(CONCURRENCY)) --rounds $(or $(ROUNDS),10) $(if $(OUT),--output $(OUT)) $(if $(CEILING),--ceiling)

# The gateway's own CPU per request against the bare proxy's, both driven in one process without
# a server (STREAM=1 for streamed answers), alternating rounds: small changes show here first.
# INSTRUCTIONS=1 counts machine instructions per request under callgrind instead (needs valgrind):
# the same from run to run where the host's clock speed makes timed rounds vary.
bench-inprocess: $(VENV)/.installed
	$(PY) manage.py benchinprocess $(if $(CONCURRENCY),--concurrency $(CONCURRENCY)) $(if $(STREAM),--stream) $(if $(INSTRUCTIONS),--instructions)

# Where the gateway's CPU goes: py-spy samples one gateway under CONCURRENCY (16) clients for
# 10 s, STREAM=1 for streamed answers; RECORD=1 appends the summary to BENCHMARKS.md.
profile: $(VENV)/.installed
	$(PY) manage.py benchprofile --concurrency $(or $(CONCURRENCY),16) $(if $(STREAM),--stream) $(if $(RECORD),--record)

# Random 503s on 5 % of upstream calls, then 429 Retry-After: 1 on 4 % of them beside a direct
# client's share under the same 429s: how many requests still succeed (BENCHMARKS.md). Fails
# when a bar is missed. Seven scenarios of at most 40 s each; --requests shrinks them.
availability: $(VENV)/.installed
	$(PY) manage.py availability --requests 2000 --concurrency 16 --duration 40 --write

# kill -9 the gateway under load, start it again on the same data: breakers, cooldowns, terminal
# states, model locks and leases as they were; SQLite + memory store, then PostgreSQL + Redis
# (skipped when unreachable, required when CI=true).
.PHONY: restart-test
restart-test: export OMNIROUTE_DEBUG ?= 1
restart-test: $(VENV)/.installed
	$(PY) manage.py restarttest

# Long fuzzing (tests/fuzz, HYPOTHESIS_PROFILE=long): 2 000 cases per property of the pure
# modules, 40 random requests per API operation (the /v1 ones on a running gateway) plus
# schemathesis's coverage phase, and 1 000 request bodies per /v1 wire format sent to a running
# gateway. About 10 minutes on a 2-core machine; stopped after 30. `make test` runs the short
# profile.
fuzz: export DJANGO_SETTINGS_MODULE = omniroute.settings_test
fuzz: export HYPOTHESIS_PROFILE = long
fuzz: $(VENV)/.installed
	timeout 1800 $(VENV)/bin/pytest tests/fuzz -q

# Minutes of mixed streaming and plain load on a healthy upstream: the gateway's RSS growth after
# a warm-up must stay under 2 MiB/min and no request may fail (BENCHMARKS.md; SOAK_DURATION sets
# the seconds). soak-short is the CI smoke version: 20 s, fitted over its last 12 s, where one
# 1-3 MiB allocator step already reads as 5-18 MiB/min, so it only catches a gross leak (32).
soak: $(VENV)/.installed
	$(PY) manage.py soak --duration $(or $(SOAK_DURATION),180) --write

soak-short: $(VENV)/.installed
	$(PY) manage.py soak --duration 20 --warm-up 8 --bound 32

# Seeded upstream faults, a provider outage and a Redis kill (the run's own redis-server) under
# load: every route answers what a direct client would under the same faults (the gateway's
# refusals count as failures), no hang, no double or truncated answer, breakers recover, no
# terminal state (BENCHMARKS.md). chaos-short is the version .ci/run runs (under a minute).
CHAOS_ARGS ?=
chaos: $(VENV)/.installed
	$(PY) manage.py chaos --requests 2000 --concurrency 16 --write $(CHAOS_ARGS)

chaos-short: $(VENV)/.installed
	$(PY) manage.py chaos --requests 600 --concurrency 16 --duration 60 $(CHAOS_ARGS)

clean:
	rm -rf $(VENV) data .mypy_cache .ruff_cache
