# aiokafka_lite developer tasks (GNU make). `make help` lists them.

VENV ?= .venv
PYTHON ?= python3
PY := $(VENV)/bin/python
PORT ?= 9092
# Extra arguments for pytest, e.g. `make test PYTEST_ARGS="-x -k proxy"`.
PYTEST_ARGS ?=
# The suite mostly waits (on brokers, timeouts, subprocesses), so make test runs it on
# TEST_WORKERS pytest-xdist workers. --dist loadfile, with the scopes tests/conftest.py
# gives: a file at a time (its module fixtures, such as a Spark session, start once), the
# CPU-heavy files one after another, the unit tests on one worker. TEST_WORKERS=0: one
# process, as plain `pytest` does.
TEST_WORKERS ?= 4
XDIST_ARGS := $(if $(filter 0,$(TEST_WORKERS)),,-n $(TEST_WORKERS) --dist loadfile)
# Extra arguments for the demo, e.g. `make demo DEMO_ARGS="--duration 60 --rate 1000"`.
DEMO_ARGS ?=
# Set when the editable install is done; redone when pyproject.toml changes.
STAMP := $(VENV)/.aiokafka-lite-installed
SYSTEM_TOOLS := kcat socat tmux openssl

.DEFAULT_GOAL := help

.PHONY: help install system-tools test test-noida test-pythons test-spark-cluster lint broker bench bench-quick bench-micro results demo compat chaos fuzz soak many-clients clean distclean

help:
	@echo "make install     create $(VENV) and install aiokafka_lite with its dev extras (+ kcat, socat, tmux, openssl, java)"
	@echo "make test        the whole test suite on the auto-picked broker, on \$$TEST_WORKERS ($(TEST_WORKERS)) workers"
	@echo "make test-noida  the integration tests (but chaos) against noida-db's Kafka service"
	@echo "make test-pythons the unit tests and the core integration tests on Python 3.10, 3.12, 3.13 (those found)"
	@echo "make test-spark-cluster  the Spark tests on a standalone cluster (master + 2 workers) and the exactly-once sink's"
	@echo "make lint        ruff check, ruff format --check, mypy"
	@echo "make broker      an embedded Tansu broker in the foreground on port \$$PORT ($(PORT))"
	@echo "make bench       the benchmarks vs aiokafka and confluent-kafka: workloads, fetch ceiling, memory, latency,"
	@echo "                 group (~1.5 h on 2 cores; benchmarks/README.md)"
	@echo "make bench-quick the same as a smoke run (~7 min; results in benchmarks/results/quick/)"
	@echo "make bench-micro the older single-shape benchmarks (bench_produce, bench_consume, bench_records)"
	@echo "make results     the reference results (benchmarks/README.md) regenerated in turn (~80 min): after a hot-path change"
	@echo "make demo        the Spark streaming pipeline demo on an embedded broker"
	@echo "make chaos       the eleven chaos scenarios at full size; prints the table (~12 min)"
	@echo "make fuzz        fuzz the decoders for FUZZ_SECONDS (300) per target (~10 min on 2 cores)"
	@echo "make soak        10-minute produce/consume soak; chart in benchmarks/results/"
	@echo "make many-clients 200 producers + 200 group consumers in one event loop for 2 minutes"
	@echo "make compat      FastStream 0.7.4's Kafka tests and aiokafka's examples: aiokafka vs the alias"
	@echo "make clean       remove caches and build output (distclean: the venv too)"

install: $(STAMP)

$(STAMP): pyproject.toml aiokafka_lite/_speedups.c
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --disable-pip-version-check -q -e '.[dev]'
	@$(MAKE) --no-print-directory system-tools
	@touch $@

# Debian's kcat, socat, tmux and openssl (tests use them) and Java (Spark): installed
# with apt-get when missing and we are root; otherwise (or if apt fails) a note. The
# tests that need a missing tool skip, saying which; with CI=true they fail instead.
system-tools:
	@missing=""; \
	for tool in $(SYSTEM_TOOLS); do command -v $$tool >/dev/null 2>&1 || missing="$$missing $$tool"; done; \
	if [ -z "$$missing" ]; then exit 0; fi; \
	if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
		echo "installing$$missing with apt-get"; \
		{ apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq$$missing; } \
			|| echo "warning: apt-get could not install$$missing; carrying on without"; \
	else \
		echo "note:$$missing not found; install with: sudo apt-get install$$missing"; \
	fi
	@command -v java >/dev/null 2>&1 || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 \
		&& DEBIAN_FRONTEND=noninteractive apt-get install -y -qq openjdk-17-jre-headless; } \
		|| echo "note: java not found; Spark (tests/integration/test_spark*.py, make demo) needs Java 17+"

# pytest exits 5 when it ran no test: that is a failure here, never a silent pass.
# run_pytest_phases PYTHON,MARKERS,PATHS: among the tests MARKERS selects (all when
# empty), those marked serial (timing that a busy machine upsets) in one process first,
# then the others on the workers. Both phases always run; the target fails if either
# fails, or if neither ran a test (exit 5 alone is fine: a selection may hold no serial
# test). PYTEST_ARGS with its own -m would override the phases' -m: add to MARKERS instead.
define run_pytest_phases
	@echo '$(1) -m pytest -m "$(if $(2),($(2)) and )serial" $(3) $(PYTEST_ARGS)'
	@echo '$(1) -m pytest $(XDIST_ARGS) -m "$(if $(2),($(2)) and )not serial" $(3) $(PYTEST_ARGS)'
	@$(1) -m pytest -m "$(if $(2),($(2)) and )serial" $(3) $(PYTEST_ARGS); a=$$?; \
	$(1) -m pytest $(XDIST_ARGS) -m "$(if $(2),($(2)) and )not serial" $(3) $(PYTEST_ARGS); b=$$?; \
	if [ $$a -eq 5 ] && [ $$b -eq 5 ]; then echo "error: pytest ran no tests (exit 5)" >&2; exit 5; fi; \
	for rc in $$a $$b; do if [ $$rc -ne 0 ] && [ $$rc -ne 5 ]; then exit $$rc; fi; done
endef

# Every test (there is no `slow` marker: the long runs are make chaos, soak, fuzz, bench).
test: $(STAMP)
	$(call run_pytest_phases,$(PY),,)

# A standalone Spark cluster (master and two workers from pyspark's bin/spark-class, on
# 127.0.0.1) and the exactly-once sink's failure tests; make test runs them too.
test-spark-cluster: $(STAMP)
	$(PY) -m pytest tests/integration/test_spark_cluster.py tests/integration/test_spark_exactly_once.py $(PYTEST_ARGS)

# The chaos tests always build their own Tansu behind a fault proxy (Tansu can advertise
# the proxy's address); the default suite runs them already.
test-noida: $(STAMP)
	$(call run_pytest_phases,AIOKAFKA_LITE_TEST_BROKER=noida $(PY),integration and not chaos,tests/integration)

# The other Pythons pyproject admits (>=3.10; .venv is the machine's python3): each found
# (python3.X that runs, else pyenv's versions/3.X.*) gets its own venv, .venv-3.X, with
# the package (its compiled hot path built for that version) and the test extras, and
# runs the unit tests and PYTHONS_TESTS, a real-broker round of the core (produce,
# consume, groups, transactions, the peers reading our bytes). A version not found is
# named and skipped; the target fails if any version found fails.
OTHER_PYTHONS ?= 3.10 3.12 3.13
PYTHONS_TESTS ?= tests/unit tests/integration/test_producer.py tests/integration/test_consumer.py \
	tests/integration/test_group.py tests/integration/test_producer_transactions.py \
	tests/integration/test_wire_interop.py
test-pythons:
	@failed=""; ran=""; \
	for v in $(OTHER_PYTHONS); do \
		py=""; \
		if python$$v -c '' >/dev/null 2>&1; then py=$$(command -v python$$v); \
		else for c in $${PYENV_ROOT:-$$HOME/.pyenv}/versions/$$v.*/bin/python$$v; do \
			[ -x "$$c" ] && py="$$c"; done; fi; \
		if [ -z "$$py" ]; then echo "== Python $$v: not found on this machine, skipped"; continue; fi; \
		venv=$(VENV)-$$v; echo "== Python $$v ($$py) in $$venv"; ran="$$ran $$v"; \
		{ test -x $$venv/bin/python || $$py -m venv $$venv; } \
			&& $$venv/bin/python -m pip install --disable-pip-version-check -q -e '.[test]' \
			&& $$venv/bin/python -c 'import aiokafka_lite.accel as a, sys; print("compiled hot path:", a.COMPILED); sys.exit(not a.COMPILED)' \
			|| { failed="$$failed $$v"; continue; }; \
		$$venv/bin/python -m pytest -m serial $(PYTHONS_TESTS) $(PYTEST_ARGS); a=$$?; \
		$$venv/bin/python -m pytest $(XDIST_ARGS) -m "not serial" $(PYTHONS_TESTS) $(PYTEST_ARGS); b=$$?; \
		if { [ $$a -ne 0 ] && [ $$a -ne 5 ]; } || [ $$b -ne 0 ]; then failed="$$failed $$v"; fi; \
	done; \
	echo "Pythons run:$${ran:- none}"; \
	if [ -n "$$failed" ]; then echo "failed on:$$failed" >&2; exit 1; fi

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy

broker: $(STAMP)
	$(PY) -m aiokafka_lite.testing --port $(PORT)

# The benchmarks (benchmarks/README.md), each writing JSON + PNG to benchmarks/results/
# with the commit measured: the realistic workloads against aiokafka and confluent-kafka
# (the headline), producer memory over 512 partitions, latency (on noida-db) and a
# 10-member group. BENCH_ARGS go to each, e.g. BENCH_ARGS="--quick" (bench-quick).
# Every script runs even when one fails; the exit status says whether any did.
BENCH_ARGS ?=
BENCH_SCRIPTS := bench_workloads bench_fetch_ceiling bench_memory bench_latency bench_group
MICRO_SCRIPTS := bench_produce bench_consume bench_records
define run_benches
	@failed=""; \
	for bench in $(1); do \
		echo "== benchmarks/$$bench.py $(2)"; \
		$(PY) benchmarks/$$bench.py $(2) || failed="$$failed $$bench"; \
	done; \
	if [ -n "$$failed" ]; then echo "failed:$$failed" >&2; exit 1; fi
endef

bench: $(STAMP)
	$(call run_benches,$(BENCH_SCRIPTS),$(BENCH_ARGS))

bench-quick: $(STAMP)
	$(call run_benches,$(BENCH_SCRIPTS),--quick $(BENCH_ARGS))

bench-micro: $(STAMP)
	$(call run_benches,$(MICRO_SCRIPTS),$(BENCH_ARGS))

# Every result benchmarks/README.md keeps as the reference, regenerated one after the
# other on this tree with the options it names (~80 min on 2 cores; run nothing else
# meanwhile): what a change to a hot path owes before it lands. Every run goes on when
# one fails; the exit status says whether any did. Soak and many-clients are apart
# (make soak, make many-clients: 1 h more).
RESULT_RUNS := \
	"benchmarks/bench_workloads.py --repeat 3" \
	"benchmarks/bench_fetch_ceiling.py --repeat 3" \
	"benchmarks/bench_fetch_ceiling.py --partitions 512 --repeat 3" \
	"benchmarks/bench_memory.py --repeat 3" \
	"benchmarks/bench_latency.py --repeat 3" \
	"benchmarks/bench_group.py --repeat 3" \
	"benchmarks/bench_workloads.py --workloads uniform,service --codecs none --batch-sizes 4096,16384,65536,1048576 --directions produce --repeat 3 --out benchmarks/results/batch-size-sweep" \
	"-m tests.chaos.run" \
	"benchmarks/bench_future_type.py" \
	"benchmarks/bench_spark_write.py" \
	"benchmarks/bench_spark_write.py --cluster" \
	"benchmarks/bench_spark_read.py" \
	"benchmarks/bench_spark_read.py --cluster" \
	"benchmarks/bench_spark_stream.py" \
	"benchmarks/bench_spark_stream.py --cluster" \
	"benchmarks/bench_record_cost.py --repeat 5"

results: $(STAMP)
	@failed=""; \
	for run in $(RESULT_RUNS); do \
		echo "== $$(date -u +%H:%M:%S) python $$run"; \
		$(PY) $$run || failed="$$failed; $$run"; \
	done; \
	if [ -n "$$failed" ]; then echo "failed:$$failed" >&2; exit 1; fi

# The data pipeline demo, examples/spark_pipeline.py (docs/spark.md): embedded broker
# (or $KAFKA_BOOTSTRAP_SERVERS), an async producer service, a Spark Structured Streaming
# query through the aiokafka_lite data source, an async consumer group; checks the totals.
# Needs Java 17+ for Spark.
demo: $(STAMP)
	@command -v java >/dev/null 2>&1 || { echo "make demo: Spark needs Java 17+ (Debian: apt-get install openjdk-17-jre-headless)" >&2; exit 1; }
	$(PY) examples/spark_pipeline.py $(DEMO_ARGS)

# Chaos scenarios at full size (200k records, 30 s outage, ...) and the table, on an
# embedded Tansu per scenario, or on $KAFKA_BOOTSTRAP_SERVERS when set (docs/reliability.md).
# CHAOS_ARGS, e.g. CHAOS_ARGS="--size short --scenarios idempotent,outage".
CHAOS_ARGS ?=
chaos: $(STAMP)
	$(PY) -m tests.chaos.run $(CHAOS_ARGS)

# Fuzz every decoder target for FUZZ_SECONDS each (atheris when installed, else the
# built-in mutator); reports inputs tried and crashes, exit 1 on any crash.
FUZZ_SECONDS ?= 300
fuzz: $(STAMP)
	$(PY) -m tests.fuzz.run --seconds $(FUZZ_SECONDS)

# Produce/consume soak; SOAK_ARGS="--duration 60" for a short one.
SOAK_ARGS ?=
soak: $(STAMP)
	$(PY) benchmarks/soak.py $(SOAK_ARGS)

# 200 producers and 200 consumers (20 groups) in one event loop; MANY_ARGS="--duration 30".
MANY_ARGS ?=
many-clients: $(STAMP)
	$(PY) benchmarks/many_clients.py $(MANY_ARGS)

clean:
	rm -rf build dist .pytest_cache .mypy_cache .ruff_cache .hypothesis .fuzz ./*.egg-info
	find . -path './$(VENV)*' -prune -o -name __pycache__ -type d -prune -exec rm -rf {} +
	rm -f $(STAMP)

distclean: clean
	rm -rf $(VENV) $(VENV)-3.*

# Code nobody here wrote, run with aiokafka and then on aiokafka_lite through the
# aiokafka alias: FastStream 0.7.4's Kafka tests and aiokafka's examples; prints both
# pass counts side by side (tests/compat/run.py). Needs PyPI, and FastStream's and
# aiokafka's git repositories (a local mirror or GitHub); not part of `make test`.
COMPAT_ARGS ?=
compat: $(STAMP)
	$(PY) -m tests.compat.run $(COMPAT_ARGS)
