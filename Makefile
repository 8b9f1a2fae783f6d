# Entry points: `make run` (dev broker) and `make test` (everything CI runs).
PY ?= python3
VENV := .venv
VPY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: run test lint typecheck bench bench-broker demo clean install clients clean-clients

# Real RocketMQ clients for tests/broker/test_real_clients.py (and the ACL and interop tests), each in .clients/ (never in $(VENV)):
# ali-ons (npm, pure JS) and rocketmq==0.4.4 (PyPI, bundles the C++ client; manylinux x86_64 only,
# in its own venv because every "rocketmq" wheel imports as `rocketmq`). Installed once (stamps).
# With CI=true on x86_64 a failed install stops `make test`; elsewhere it only warns and the
# client's tests skip, saying why.
# The 5.x gRPC clients, for tests/broker/grpc/test_{python,node}_client.py: rocketmq-python-client
# (PyPI, pure Python; it also imports as `rocketmq` and its stubs clash with the broker's, so it has
# its own venv) and rocketmq-client-nodejs (npm).
CLIENTS := .clients
ONS_VERSION := 3.12.0
CPP_VERSION := 0.4.4
ONS_STAMP := $(CLIENTS)/npm/.ali-ons-$(ONS_VERSION).installed
CPP_VENV := $(CLIENTS)/cpp044
CPP_STAMP := $(CPP_VENV)/.rocketmq-$(CPP_VERSION).installed
PY5_VERSION := 5.1.2
PY5_VENV := $(CLIENTS)/grpc5
PY5_STAMP := $(PY5_VENV)/.rocketmq-python-client-$(PY5_VERSION).installed
NODE5_VERSION := 1.0.8
NODE5_STAMP := $(CLIENTS)/npm5/.rocketmq-client-nodejs-$(NODE5_VERSION).installed
ARCH := $(shell uname -m)
CLIENTS_REQUIRED := $(and $(filter true,$(CI)),$(filter x86_64 amd64,$(ARCH)))
define client_failed
if [ -n "$(CLIENTS_REQUIRED)" ]; then \
	echo "error: $(1) could not be installed; CI=true on $(ARCH) requires it" >&2; exit 1; \
else \
	echo "warning: $(1) could not be installed on $(ARCH); the real-client tests will skip it" >&2; \
fi
endef

$(VPY):
	$(PY) -m venv $(VENV)
	$(VPY) -m pip install -q -U pip

# With CI=true the compiled data plane must load (ROCKETLITE_NATIVE=1: a failed build fails the
# tests instead of passing slowly); the protocol, store and broker tests then run once more on the
# Python reference implementations (ROCKETLITE_NATIVE=0), which must give the same answers.
NATIVE_REQUIRED := $(if $(filter true,$(CI)),1,)
NATIVE_SOURCES := setup.py $(wildcard src/rocketlite/protocol/_native/*.pyx src/rocketlite/protocol/_native/*.pxi) \
	$(wildcard src/rocketlite/protocol/proto/apache/rocketmq/v2/*.proto)

# pip install -e builds the compiled data plane in place (src/rocketlite/protocol/_native/*.so).
$(STAMP): $(VPY) pyproject.toml $(NATIVE_SOURCES)
	$(VPY) -m pip install -q -e '.[fast,cli,test,lint,spark,grpc]'
	touch $(STAMP)

install: $(STAMP)

run: $(STAMP)
	$(VENV)/bin/rocketlite dev

lint: $(STAMP)
	$(VENV)/bin/ruff check src tests bench
	$(VENV)/bin/lint-imports
	$(VENV)/bin/ruff format --check src tests bench

typecheck: $(STAMP)
	$(VENV)/bin/mypy

$(ONS_STAMP):
	@mkdir -p $(CLIENTS)/npm
	@if [ -d $(CLIENTS)/npm/node_modules/ali-ons ] || \
	   npm install --no-audit --no-fund --prefix $(CLIENTS)/npm ali-ons@$(ONS_VERSION); then \
		touch $@; \
	else \
		$(call client_failed,npm ali-ons@$(ONS_VERSION)); \
	fi

$(CPP_STAMP):
	@if { [ -x $(CPP_VENV)/bin/python ] && $(CPP_VENV)/bin/python -c 'import rocketmq.client' 2>/dev/null; } || \
	   { $(PY) -m venv $(CPP_VENV) && $(CPP_VENV)/bin/pip install -q rocketmq==$(CPP_VERSION) && \
	     $(CPP_VENV)/bin/python -c 'import rocketmq.client'; }; then \
		touch $@; \
	else \
		$(call client_failed,PyPI rocketmq==$(CPP_VERSION)); \
	fi

$(PY5_STAMP):
	@if { [ -x $(PY5_VENV)/bin/python ] && $(PY5_VENV)/bin/python -c 'import rocketmq.v5' 2>/dev/null; } || \
	   { $(PY) -m venv $(PY5_VENV) && $(PY5_VENV)/bin/pip install -q rocketmq-python-client==$(PY5_VERSION) && \
	     $(PY5_VENV)/bin/python -c 'import rocketmq.v5'; }; then \
		touch $@; \
	else \
		$(call client_failed,PyPI rocketmq-python-client==$(PY5_VERSION)); \
	fi

$(NODE5_STAMP):
	@mkdir -p $(CLIENTS)/npm5
	@if [ -d $(CLIENTS)/npm5/node_modules/rocketmq-client-nodejs ] || \
	   npm install --no-audit --no-fund --prefix $(CLIENTS)/npm5 rocketmq-client-nodejs@$(NODE5_VERSION); then \
		touch $@; \
	else \
		$(call client_failed,npm rocketmq-client-nodejs@$(NODE5_VERSION)); \
	fi

clients: $(ONS_STAMP) $(CPP_STAMP) $(PY5_STAMP) $(NODE5_STAMP)

clean-clients:
	rm -rf $(CLIENTS)

# The Spark tests get a pytest process of their own, one that never loads grpc: PySpark forks its
# JVM (a `preexec_fn`), and a fork beside grpc's threads once killed that JVM at birth
# (JAVA_GATEWAY_EXITED). rocketlite makes such forks safe itself (protocol/proto/__init__.py,
# tested by tests/spark/test_grpc_fork.py); the suite keeps the two apart all the same.
test: $(STAMP) clients
	$(VENV)/bin/ruff check src tests bench
	$(VENV)/bin/lint-imports
	$(VENV)/bin/mypy
	ROCKETLITE_NATIVE=$(NATIVE_REQUIRED) $(VPY) -m pytest --ignore=tests/spark
	ROCKETLITE_NATIVE=$(NATIVE_REQUIRED) $(VPY) -m pytest tests/spark
	ROCKETLITE_NATIVE=0 $(VPY) -m pytest -q tests/protocol tests/store tests/broker

bench: $(STAMP)
	$(VPY) bench/store_bench.py

# Broker vs Redis Streams over loopback (needs Debian's redis-server: apt-get install -y redis-server).
bench-broker: $(STAMP)
	$(VPY) bench/broker_bench.py

# The Spark clickstream pipeline end to end on an embedded broker (needs Java 17+ on the PATH).
demo: $(STAMP)
	$(VPY) examples/clickstream/pipeline.py

clean:
	rm -rf $(VENV) build *.egg-info
