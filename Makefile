# Thin targets; the work lives in Python modules.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp

# The command line is `workflow-mcp` (the venv's console script); see `workflow-mcp --help`.
CLI := $(VENV)/bin/workflow-mcp

.PHONY: venv run worker migrate test test-only test-fast lint typecheck codegen codegen-check validate-contracts fuzz token schema-snapshot bench bench-invoke bench-peers bench-overload bench-wrk bench-refusals fault-load e2e gateway mutation-pass clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install -q --disable-pip-version-check --upgrade pip
	$(VENV)/bin/pip install -q --disable-pip-version-check -e '.[dev]'
	touch $(STAMP)

venv: $(STAMP)

# `make run` and `make worker` are the development configuration: local backends on loopback are
# reachable over plain `http://` (elsewhere no internal network is, unless
# publication.destinations.allowed_networks, and only https is, unless allowed_schemes). A variable
# already set in the environment wins.
run worker: export WORKFLOW_PUBLICATION_DESTINATIONS_ALLOWED_NETWORKS ?= ["127.0.0.0/8", "::1/128"]
run worker: export WORKFLOW_PUBLICATION_DESTINATIONS_ALLOWED_SCHEMES ?= ["http", "https"]

run: venv
	$(CLI) serve $(ARGS)

# A worker process beside `make run ARGS=--no-workers` (same configuration and database).
worker: venv
	$(CLI) worker $(ARGS)

# The reference Gateway in front of `make run` (gateway/; docs/OPERATIONS.md "Gateway"):
# make gateway ARGS="--router mcp-router.yml"
gateway: venv
	$(CLI) gateway $(ARGS)

migrate: venv
	$(CLI) migrate $(ARGS)

test: venv lint typecheck test-only

# Two pytest workers (pytest-xdist), each with its own embedded PostgreSQL: the suite waits on
# processes and timers as much as it computes, so two cores finish it in about half the time.
# A file's tests run on one worker (--dist loadfile): tests that bind a fixed port (the README
# walkthrough's) live in one file. TEST_WORKERS=0 runs everything in one process.
TEST_WORKERS ?= 2

test-only: venv
	$(PY) -m pytest -q -n $(TEST_WORKERS) --dist loadfile --ignore=tests/fuzz

# The edit loop: tests/unit only (no PostgreSQL, no service processes), in two workers: 20 s of
# CPU (user+sys, /usr/bin/time -v) and 14 s on two quiet cores, 22-24 s of CPU while other jobs
# share them (75-86 s when it held tests/contracts). The contract and codegen tests
# (tests/contracts: the code generator's subprocesses, hypothesis) run in `make test`. Every
# pytest process would import the schemathesis, Faker and typeguard plugins, which no unit test
# uses (schemathesis alone pulls in hypothesis): left out, they cost nothing.
UNIT_PLUGINS_OFF := -p no:schemathesis -p no:faker -p no:typeguard

test-fast: venv
	$(PY) -m pytest -q -n $(TEST_WORKERS) --dist loadfile $(UNIT_PLUGINS_OFF) tests/unit

lint: venv
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

typecheck: venv
	$(VENV)/bin/mypy runtime handlers codegen gateway publisher workflow_mcp

codegen: venv
	$(PY) -m codegen.generate

codegen-check: codegen
	git diff --exit-code -- generated/
	@test -z "$$(git status --porcelain -- generated/)" || (git status --porcelain -- generated/; echo "generated/ has files git does not track"; exit 1)

validate-contracts: venv
	$(PY) -m codegen.validate

# The suites that start real processes (service, Gateway, backends); `make test` runs them too.
e2e: venv
	$(PY) -m pytest -q tests/e2e tests/qualification

fuzz: venv
	$(PY) -m pytest -q tests/fuzz

# Faults under load tell the truth (issue 42 item 7; bench/fault_load.py): 50 callers on a write
# Tool while the service is killed (SIGKILL) and, in a second round, PostgreSQL restarted with
# `pg_ctl restart -m immediate`; after same-key retries 0 effects lost, 0 doubled, 0 runs stuck,
# no answer against the stored effect state, no unhandled task exception. About 30-60 s; CI runs it.
fault-load: venv
	$(PY) -m bench.fault_load $(ARGS)

# make token ARGS="--kind user --roles workflow-admin"
token: venv
	@$(CLI) token $(ARGS)

schema-snapshot: venv
	$(PY) -m runtime.store.migrations snapshot

bench: venv
	$(PY) -m bench.engine $(ARGS)

bench-invoke: venv
	$(PY) -m bench.invoke $(ARGS)

# The DBOS peer lives in its own pinned venv (never in .venv, never in pyproject.toml).
PEER_VENV := .bench-peers-venv
PEER_STAMP := $(PEER_VENV)/.installed-stamp

$(PEER_STAMP): bench/peers/requirements.txt
	$(PYTHON) -m venv $(PEER_VENV)
	$(PEER_VENV)/bin/pip install -q --disable-pip-version-check -r bench/peers/requirements.txt
	touch $(PEER_STAMP)

# make bench-peers ARGS="--quick --out peers.json" (docs/PERFORMANCE.md)
bench-peers: venv $(PEER_STAMP)
	$(PY) -m bench.peers.run --peer-python $(PEER_VENV)/bin/python $(ARGS)

# One Tool under overload (closed loops that retry refusals at once, open loops at 2x, the
# overload pairs): the ours-direct target of bench-peers, with its lean driver.
bench-overload: venv $(PEER_STAMP)
	$(PY) -m bench.peers.run --peer-python $(PEER_VENV)/bin/python --only one-tool/ours-direct $(ARGS)

# The wrk layout of bench-peers alone: Debian's wrk 4.1 (installed when missing and root) on one
# Tool, c=1/10/50/200/400, a client that resends refusals and one that sends new calls, both eras
# at c=50, the DBOS peer beside it. make bench-wrk ARGS="--wrk-seconds 15" (docs/PERFORMANCE.md)
bench-wrk: venv $(PEER_STAMP)
	$(PY) -m bench.peers.run --peer-python $(PEER_VENV)/bin/python --only wrk $(ARGS)

# What a refusal costs next to an admitted call (docs/PERFORMANCE.md): open loops on one Tool.
bench-refusals: venv
	$(PY) -m bench.refusals $(ARGS)

# The mutation pass (issue 40; not part of `make test`): each check of tests/mutation/mutations.yaml
# disabled in turn in a temporary copy of the tree, its mapped tests run (-x -q, one at a time);
# killed or survived per mutation. make mutation-pass ARGS="--only ID ..." or ARGS="--rule RULE".
mutation-pass: venv
	$(PY) -m tests.mutation.run $(ARGS)

clean:
	rm -rf $(VENV) $(PEER_VENV) .mypy_cache .ruff_cache
