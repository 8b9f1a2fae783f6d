# Entry points: `make run` (dev broker) and `make test` (everything CI runs).
PY ?= python3
VENV := .venv
VPY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: nghttp2 run test deps lint typecheck docs bench bench-broker bench-failover bench-peers bench-peers-deps bench-spark-kafka bench-spark-kafka-deps peersgen demo clean install clients clean-clients java-clients go-clients rocketmq-peer mqadmin etcd faketime dashboard ghz

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
NATIVE_SOURCES := setup.py $(wildcard src/rocketlite/*/_native/*.pyx src/rocketlite/*/_native/*.pxi) \
	$(wildcard src/rocketlite/*/*/_native/*.pyx src/rocketlite/*/*/_native/*.pxi) \
	$(wildcard src/rocketlite/protocol/proto/apache/rocketmq/v2/*.proto)

# libnghttp2's headers, for the compiled HTTP/2 core of the 5.x gRPC endpoint
# (src/rocketlite/remoting/h2/_native/_h2.pyx): Debian's libnghttp2-dev matching the installed
# runtime libnghttp2-14, fetched with `apt-get download` and unpacked with `dpkg-deb -x` into
# .clients/nghttp2 (no root); setup.py compiles against its headers and links the system's
# libnghttp2.so.14. Without them the build goes on without that extension and the broker serves
# 5.x on grpc.aio (said once); with CI=true a failed fetch stops the build.
NGHTTP2_DIR := $(CLIENTS)/nghttp2
NGHTTP2_STAMP := $(NGHTTP2_DIR)/.nghttp2-dev.installed

$(NGHTTP2_STAMP):
	@rm -rf $(NGHTTP2_DIR)/usr $(NGHTTP2_DIR)/deb && mkdir -p $(NGHTTP2_DIR)/deb
	@if (cd $(NGHTTP2_DIR)/deb && apt-get download -q libnghttp2-dev >/dev/null 2>&1) && \
	   dpkg-deb -x $(NGHTTP2_DIR)/deb/libnghttp2-dev_*.deb $(NGHTTP2_DIR) && \
	   [ -f $(NGHTTP2_DIR)/usr/include/nghttp2/nghttp2.h ]; then \
		rm -rf $(NGHTTP2_DIR)/deb; touch $@; \
	elif [ "$(CI)" = true ]; then \
		echo "error: libnghttp2-dev could not be fetched; CI=true requires the compiled HTTP/2 core" >&2; \
		exit 1; \
	else \
		rm -rf $(NGHTTP2_DIR)/deb; \
		echo "warning: libnghttp2-dev could not be fetched; the 5.x endpoint will run on grpc.aio" >&2; \
	fi

nghttp2: $(NGHTTP2_STAMP)

# pip install -e builds the compiled data plane in place (src/rocketlite/**/_native/*.so, beside each .pyx).
$(STAMP): $(VPY) pyproject.toml $(NATIVE_SOURCES) | $(NGHTTP2_STAMP)
	$(VPY) -m pip install -q -e '.[fast,cli,test,lint,spark,grpc,docs]'
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

# The docs site (mkdocs.yml, docs/) into build/site (git-ignored). --strict fails on a broken
# link or anchor and on a page left out of the nav. The NO_MKDOCS_2_WARNING variable silences the
# theme's end-of-life banner, which is not about this site.
MKDOCS := NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs
docs: $(STAMP)
	$(MKDOCS) build --strict --quiet

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

# The Java RocketMQ clients, for tests/peers/java/: the remoting client org.apache.rocketmq:rocketmq-client
# 4.9.8 (+ rocketmq-acl) and 5.3.3, and the 5.x gRPC client rocketmq-client-java 5.2.0, from Maven
# Central, each with our scenario driver compiled against it (tests/peers/java/pom.xml, profiles
# client4 / client5 / grpc5) into .clients/java/<profile>/{build,lib}.
# Maven's local repository is .clients/java/m2, so a fresh clone needs nothing but java and mvn.
# Rebuilt when the pom or a driver changes. With CI=true a failed build stops `make test`;
# elsewhere it warns and the Java tests skip, saying why.
JAVA_CLIENTS := $(CLIENTS)/java
JAVA_POM := tests/peers/java/pom.xml
JAVA_STAMP := $(JAVA_CLIENTS)/.drivers.built
JAVA_SOURCES := $(JAVA_POM) $(wildcard tests/peers/java/src/rocketlite/peers/*.java)
MVN := mvn -q -B -Dstyle.color=never -Dmaven.repo.local=$(abspath $(JAVA_CLIENTS))/m2 -f $(JAVA_POM)

$(JAVA_STAMP): $(JAVA_SOURCES)
	@rm -rf $(JAVA_CLIENTS)/client4/lib $(JAVA_CLIENTS)/client5/lib $(JAVA_CLIENTS)/grpc5/lib
	@if command -v java >/dev/null && command -v mvn >/dev/null && \
	   $(MVN) -P client4 compile dependency:copy-dependencies && \
	   $(MVN) -P client5 compile dependency:copy-dependencies && \
	   $(MVN) -P grpc5 compile dependency:copy-dependencies; then \
		touch $@; \
	elif [ "$(CI)" = true ]; then \
		echo "error: the Java clients (Maven: rocketmq-client 4.9.8, 5.3.3, rocketmq-client-java 5.2.0) could not be built; CI=true requires them" >&2; \
		exit 1; \
	else \
		echo "warning: the Java clients (Maven: rocketmq-client 4.9.8, 5.3.3, rocketmq-client-java 5.2.0) could not be built; their tests will skip" >&2; \
	fi

java-clients: $(JAVA_STAMP)

# RocketMQ's own name server and broker (rocketmq-namesrv + rocketmq-broker 5.3.3 and their jars),
# the differential peer of tests/peers/rocketmq/: tests/peers/rocketmq/pom.xml copies them into
# .clients/rocketmq/lib through the Java clients' local repository (.clients/java/m2). Fetched
# again when the pom changes. With CI=true a failed fetch stops `make test`; elsewhere it warns
# and the differential tests skip, saying why.
PEER_DIR := $(CLIENTS)/rocketmq
PEER_POM := tests/peers/rocketmq/pom.xml
PEER_STAMP := $(PEER_DIR)/.peer.installed
PEER_MVN := mvn -q -B -Dstyle.color=never -Dmaven.repo.local=$(abspath $(JAVA_CLIENTS))/m2 -f $(PEER_POM)

$(PEER_STAMP): $(PEER_POM) | $(JAVA_STAMP)
	@rm -rf $(PEER_DIR)/lib
	@if command -v java >/dev/null && command -v mvn >/dev/null && \
	   $(PEER_MVN) dependency:copy-dependencies; then \
		touch $@; \
	elif [ "$(CI)" = true ]; then \
		echo "error: the RocketMQ peer (Maven: rocketmq-namesrv, rocketmq-broker 5.3.3) could not be fetched; CI=true requires it" >&2; \
		exit 1; \
	else \
		echo "warning: the RocketMQ peer (Maven: rocketmq-namesrv, rocketmq-broker 5.3.3) could not be fetched; tests/peers/rocketmq will skip" >&2; \
	fi

rocketmq-peer: $(PEER_STAMP)

# RocketMQ's admin tool, mqadmin 5.3.3 (org.apache.rocketmq:rocketmq-tools and its jars), for
# tests/peers/mqadmin/: tests/peers/mqadmin/pom.xml compiles our shell (many sub-commands in one
# JVM) into .clients/mqadmin/build and copies the jars into .clients/mqadmin/lib, through the Java
# clients' local repository (.clients/java/m2). Rebuilt when the pom or the shell changes. With
# CI=true a failed build stops `make test`; elsewhere it warns and the mqadmin tests skip, saying why.
MQADMIN_DIR := $(CLIENTS)/mqadmin
MQADMIN_POM := tests/peers/mqadmin/pom.xml
MQADMIN_STAMP := $(MQADMIN_DIR)/.shell.built
MQADMIN_SOURCES := $(MQADMIN_POM) $(wildcard tests/peers/mqadmin/src/rocketlite/peers/*.java)
MQADMIN_MVN := mvn -q -B -Dstyle.color=never -Dmaven.repo.local=$(abspath $(JAVA_CLIENTS))/m2 -f $(MQADMIN_POM)

$(MQADMIN_STAMP): $(MQADMIN_SOURCES) | $(PEER_STAMP)
	@rm -rf $(MQADMIN_DIR)/lib
	@if command -v java >/dev/null && command -v mvn >/dev/null && \
	   $(MQADMIN_MVN) compile dependency:copy-dependencies; then \
		touch $@; \
	elif [ "$(CI)" = true ]; then \
		echo "error: mqadmin (Maven: rocketmq-tools 5.3.3) could not be built; CI=true requires it" >&2; \
		exit 1; \
	else \
		echo "warning: mqadmin (Maven: rocketmq-tools 5.3.3) could not be built; tests/peers/mqadmin will skip" >&2; \
	fi

mqadmin: $(MQADMIN_STAMP)

# The admin requests of rocketmq-dashboard's services, through RocketMQ 5.3.3's MQAdminExt
# (org.apache.rocketmq:rocketmq-tools), for tests/peers/dashboard/: Maven Central has no dashboard
# jar to run (docs/operations/dashboard.md), so tests/peers/dashboard/pom.xml compiles our driver
# (one call of a dashboard service per stdin line) into .clients/dashboard/build and copies the
# jars into .clients/dashboard/lib, through the Java clients' local repository (.clients/java/m2).
# Rebuilt when the pom or the driver changes. With CI=true a failed build stops `make test`;
# elsewhere it warns and the dashboard tests skip, saying why.
DASHBOARD_DIR := $(CLIENTS)/dashboard
DASHBOARD_POM := tests/peers/dashboard/pom.xml
DASHBOARD_STAMP := $(DASHBOARD_DIR)/.driver.built
DASHBOARD_SOURCES := $(DASHBOARD_POM) $(wildcard tests/peers/dashboard/src/rocketlite/peers/*.java)
DASHBOARD_MVN := mvn -q -B -Dstyle.color=never -Dmaven.repo.local=$(abspath $(JAVA_CLIENTS))/m2 -f $(DASHBOARD_POM)

$(DASHBOARD_STAMP): $(DASHBOARD_SOURCES) | $(MQADMIN_STAMP)
	@rm -rf $(DASHBOARD_DIR)/lib
	@if command -v java >/dev/null && command -v mvn >/dev/null && \
	   $(DASHBOARD_MVN) compile dependency:copy-dependencies; then \
		touch $@; \
	elif [ "$(CI)" = true ]; then \
		echo "error: the dashboard driver (Maven: rocketmq-tools 5.3.3) could not be built; CI=true requires it" >&2; \
		exit 1; \
	else \
		echo "warning: the dashboard driver (Maven: rocketmq-tools 5.3.3) could not be built; tests/peers/dashboard will skip" >&2; \
	fi

dashboard: $(DASHBOARD_STAMP)


# The RocketMQ Go client, for tests/peers/go/: github.com/apache/rocketmq-client-go/v2 (pure Go),
# pinned by our own module tests/peers/go/go.mod + go.sum and fetched from the Go module proxy by
# `go build`, which writes the scenario driver .clients/go/bin/peers. GOPATH, the module cache and
# the build cache are all under .clients/go, so a fresh clone needs nothing but `go`. Rebuilt when
# the module or the driver changes. With CI=true a failed build stops `make test`; elsewhere it
# warns and the Go tests skip, saying why.
GO_CLIENTS := $(CLIENTS)/go
GO_DIR := tests/peers/go
GO_STAMP := $(GO_CLIENTS)/.driver.built
GO_ENV := GOPATH=$(abspath $(GO_CLIENTS))/gopath GOMODCACHE=$(abspath $(GO_CLIENTS))/gopath/pkg/mod \
	GOCACHE=$(abspath $(GO_CLIENTS))/cache GOFLAGS=-modcacherw GOTOOLCHAIN=local CGO_ENABLED=0

$(GO_STAMP): $(GO_DIR)/go.mod $(GO_DIR)/go.sum $(wildcard $(GO_DIR)/*.go)
	@rm -f $(GO_CLIENTS)/bin/peers
	@if command -v go >/dev/null && \
	   (cd $(GO_DIR) && $(GO_ENV) go build -o $(abspath $(GO_CLIENTS))/bin/peers .); then \
		touch $@; \
	elif [ "$(CI)" = true ]; then \
		echo "error: the Go client (rocketmq-client-go/v2) could not be built; CI=true requires it" >&2; \
		exit 1; \
	else \
		echo "warning: the Go client (rocketmq-client-go/v2) could not be built; its tests will skip" >&2; \
	fi

go-clients: $(GO_STAMP)

# etcd, the consensus engine of controller mode (tests/controller/, tests/failover/): Debian's
# etcd-server package, fetched with `apt-get download` (no root needed) and unpacked with
# `dpkg-deb -x` into .clients/etcd (the binary is .clients/etcd/usr/bin/etcd). With CI=true a
# failed fetch stops `make test`; elsewhere it warns and the etcd tests skip, saying why.
ETCD_VERSION := 3.4.23
ETCD_DIR := $(CLIENTS)/etcd
ETCD_STAMP := $(ETCD_DIR)/.etcd-$(ETCD_VERSION).installed

$(ETCD_STAMP): | $(NGHTTP2_STAMP)
	@rm -rf $(ETCD_DIR)/usr $(ETCD_DIR)/deb && mkdir -p $(ETCD_DIR)/deb
	@if (cd $(ETCD_DIR)/deb && apt-get download -q etcd-server >/dev/null 2>&1) && \
	   dpkg-deb -x $(ETCD_DIR)/deb/etcd-server_$(ETCD_VERSION)*.deb $(ETCD_DIR) && \
	   $(ETCD_DIR)/usr/bin/etcd --version >/dev/null; then \
		rm -rf $(ETCD_DIR)/deb; touch $@; \
	elif [ "$(CI)" = true ]; then \
		echo "error: etcd (Debian etcd-server $(ETCD_VERSION)) could not be fetched; CI=true requires it" >&2; \
		exit 1; \
	else \
		echo "warning: etcd (Debian etcd-server $(ETCD_VERSION)) could not be fetched; the controller-mode tests will skip" >&2; \
	fi

etcd: $(ETCD_STAMP)

# libfaketime, for the clock-skew scenario of the partition suite (bench/failover_bench.py): Debian's
# libfaketime package, fetched and unpacked like etcd into .clients/faketime (LD_PRELOAD of one
# broker). Without it that scenario skips (fails with CI=true).
FAKETIME_VERSION := 0.9.10
FAKETIME_DIR := $(CLIENTS)/faketime
FAKETIME_STAMP := $(FAKETIME_DIR)/.faketime-$(FAKETIME_VERSION).installed

$(FAKETIME_STAMP): | $(ETCD_STAMP)
	@mkdir -p $(FAKETIME_DIR)/deb
	@if (cd $(FAKETIME_DIR)/deb && apt-get download -q libfaketime >/dev/null 2>&1) && \
	   dpkg-deb -x $(FAKETIME_DIR)/deb/libfaketime_$(FAKETIME_VERSION)*.deb $(FAKETIME_DIR) && \
	   [ -f $(FAKETIME_DIR)/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1 ]; then \
		rm -rf $(FAKETIME_DIR)/deb; touch $@; \
	elif [ "$(CI)" = true ]; then \
		echo "error: libfaketime (Debian $(FAKETIME_VERSION)) could not be fetched; CI=true requires it" >&2; \
		exit 1; \
	else \
		echo "warning: libfaketime could not be fetched; the clock-skew scenario will skip" >&2; \
	fi

faketime: $(FAKETIME_STAMP)

# The native load generator of bench/peers_bench.py (bench/peers/loadgen, Go: franz-go and
# nats.go from the Go module proxy, pinned by its go.mod + go.sum), built into
# .clients/peers/bin/peersgen with the Go client's caches. Part of `clients`: its smoke test
# (tests/bench/) drives a rocketlite broker with it. With CI=true a failed build stops `make test`.
PEERS_DIR := $(CLIENTS)/peers
PEERSGEN := $(PEERS_DIR)/bin/peersgen
PEERSGEN_DIR := bench/peers/loadgen

$(PEERSGEN): $(PEERSGEN_DIR)/go.mod $(PEERSGEN_DIR)/go.sum $(wildcard $(PEERSGEN_DIR)/*.go)
	@if command -v go >/dev/null && \
	   (cd $(PEERSGEN_DIR) && $(GO_ENV) go build -o $(abspath $(PEERSGEN)) .); then \
		:; \
	elif [ "$(CI)" = true ]; then \
		echo "error: the load generator bench/peers/loadgen could not be built; CI=true requires it" >&2; \
		exit 1; \
	else \
		echo "warning: the load generator bench/peers/loadgen could not be built; its smoke test will skip" >&2; \
	fi

peersgen: $(PEERSGEN)

# ghz (github.com/bojand/ghz), the independent gRPC load tool of `bench/grpc5_bench.py --ghz`:
# `go install`ed at a pinned version from the Go module proxy into .clients/ghz/bin, with the Go
# client's module and build caches. A bench tool only: neither `clients` nor `make test` needs it.
GHZ_VERSION := v0.120.0
GHZ_DIR := $(CLIENTS)/ghz
GHZ_STAMP := $(GHZ_DIR)/.ghz-$(GHZ_VERSION).installed

$(GHZ_STAMP):
	GOBIN=$(abspath $(GHZ_DIR))/bin $(GO_ENV) go install github.com/bojand/ghz/cmd/ghz@$(GHZ_VERSION)
	touch $@

ghz: $(GHZ_STAMP)

# What bench/peers_bench.py runs beside rocketlite (not needed by `make test`): Kafka 4.4.0 and
# Spark's Kafka source (Maven Central, bench/peers/kafka/pom.xml) into .clients/peers/{kafka,
# spark-kafka}/lib; Debian's nats-server and redis-server (+ redis-tools, jemalloc, lzf) fetched
# with `apt-get download` and unpacked with `dpkg-deb -x` into .clients/peers/root (no root
# needed; `apt-get update` first on a fresh machine); RocketMQ's broker (`rocketmq-peer`).
KAFKA_POM := bench/peers/kafka/pom.xml
KAFKA_STAMP := $(PEERS_DIR)/.kafka.installed
DEBS_STAMP := $(PEERS_DIR)/.debs.installed
PEER_DEBS := nats-server redis-server redis-tools libjemalloc2 liblzf1
KAFKA_MVN := mvn -q -B -Dstyle.color=never -Dmaven.repo.local=$(abspath $(JAVA_CLIENTS))/m2 -f $(KAFKA_POM)

$(KAFKA_STAMP): $(KAFKA_POM)
	rm -rf $(PEERS_DIR)/kafka/lib $(PEERS_DIR)/spark-kafka/lib
	$(KAFKA_MVN) -P kafka dependency:copy-dependencies
	$(KAFKA_MVN) -P spark dependency:copy-dependencies
	touch $@

$(DEBS_STAMP):
	mkdir -p $(PEERS_DIR)/debs $(PEERS_DIR)/root
	cd $(PEERS_DIR)/debs && apt-get download $(PEER_DEBS)
	for deb in $(PEERS_DIR)/debs/*.deb; do dpkg-deb -x $$deb $(PEERS_DIR)/root; done
	touch $@

bench-peers-deps: $(PEERSGEN) $(KAFKA_STAMP) $(DEBS_STAMP) $(PEER_STAMP)

# Spark's Kafka source is published up to 4.2.0 (not for the project's PySpark 4.3), so
# bench/spark_kafka_bench.py runs on PySpark 4.2.0 in a venv of its own (PyPI), with rocketlite
# from the tree on its path (rocketlite's runtime dependencies, pyarrow; pytest for tests.support).
SPARK42_VENV := $(PEERS_DIR)/pyspark-4.2
SPARK42_STAMP := $(SPARK42_VENV)/.installed

$(SPARK42_STAMP):
	rm -rf $(SPARK42_VENV)
	python3 -m venv $(SPARK42_VENV)
	$(SPARK42_VENV)/bin/python -m pip install -q "pyspark==4.2.0" "pyarrow>=18" "numpy>=1.26" \
		"pyyaml>=6" "prometheus-client>=0.20" "uvloop>=0.19" pytest
	touch $@

bench-spark-kafka-deps: $(SPARK42_STAMP) $(PEERSGEN) $(KAFKA_STAMP)

bench-spark-kafka: $(STAMP) bench-spark-kafka-deps
	unshare --net sh -c 'ip link set lo up && $(VPY) bench/spark_kafka_bench.py'

clients: $(ONS_STAMP) $(CPP_STAMP) $(PY5_STAMP) $(NODE5_STAMP) $(JAVA_STAMP) $(GO_STAMP) $(PEER_STAMP) $(MQADMIN_STAMP) $(PEERSGEN) $(ETCD_STAMP) $(FAKETIME_STAMP) $(DASHBOARD_STAMP)

clean-clients:
	rm -rf $(CLIENTS)

# The Spark tests get a pytest process of their own, one that never loads grpc: PySpark forks its
# JVM (a `preexec_fn`), and a fork beside grpc's threads once killed that JVM at birth
# (JAVA_GATEWAY_EXITED). rocketlite makes such forks safe itself (protocol/proto/__init__.py,
# tested by tests/spark/test_grpc_fork.py); the suite keeps the two apart all the same.
# The last run puts the pure-Python reference of every compiled path under the suites that own
# those paths: the protocol and store suites (each codec's reference, the store's byte layouts)
# and the broker's request cores (tests/broker/processors, the send path without the lane). The
# other broker suites (HA, POP, delay, ACL, metrics, the 5.x door, the client relays) run the same
# broker code over those paths, once, in the first run; repeating them on the references was
# about a quarter of this run (918 tests before, 659 now), time the 30-minute budget of
# `make test` is short of. `--durations` names the slowest tests in CI's log.
NATIVE0_SUITES = tests/protocol tests/store tests/broker/processors
# Two pytest-xdist workers, whole files each (tests/conftest.py's scheduler keeps the two files that
# serve on the README's fixed ports together): most tests wait on processes (JVMs, brokers,
# clients), so one worker left the second core idle. On a loaded machine the main run took 15.5
# minutes this way against 19-23 minutes in one process. The Spark run stays one process: it
# shares one Spark session across its files.
TEST_WORKERS ?= 2
XDIST = -n $(TEST_WORKERS) --dist loadfile
# The install and every client fetch of `make test`, four at a time: most of them wait on the
# network (Maven Central, npm, PyPI, the Go module proxy, Debian) while the native build and the Go
# builds use the cores. The Maven builds share one local repository and the Debian fetches one
# apt, so each family runs in a line (the order-only prerequisites below).
deps:
	@$(MAKE) --no-print-directory -j4 -Otarget $(STAMP) clients

test: deps
	$(VENV)/bin/ruff check src tests bench
	$(VENV)/bin/lint-imports
	$(VENV)/bin/mypy
	$(MKDOCS) build --strict --quiet
	ROCKETLITE_NATIVE=$(NATIVE_REQUIRED) $(VPY) -m pytest $(XDIST) --ignore=tests/spark --durations=15
	ROCKETLITE_NATIVE=$(NATIVE_REQUIRED) $(VPY) -m pytest tests/spark --durations=5
	ROCKETLITE_NATIVE=0 $(VPY) -m pytest $(XDIST) -q $(NATIVE0_SUITES) --durations=5

bench: $(STAMP)
	$(VPY) bench/store_bench.py

# Broker vs Redis Streams over loopback (needs Debian's redis-server: apt-get install -y redis-server).
bench-broker: $(STAMP)
	$(VPY) bench/broker_bench.py

# Controller-mode failover figures (docs/benchmarks.md#failover): every crash and partition scenario
# 20 times, each process in a network namespace of its own, then kill -9 of the master 20 times at
# the default timings (needs root; about 20 minutes on 2 cores).
bench-failover: $(STAMP) etcd faketime
	unshare --net sh -c 'ip link set lo up && $(VPY) bench/failover_bench.py --runs 20 && \
		$(VPY) bench/failover_bench.py --defaults --runs 20 --scenario kill-master'

# rocketlite beside RocketMQ 5.3.3, Kafka 4.4 (KRaft), NATS JetStream and Redis, one after the
# other, driven by one native load generator (docs/benchmarks.md, "Peers"). Several minutes.
bench-peers: $(STAMP) bench-peers-deps
	$(VPY) bench/peers_bench.py

# The Spark clickstream pipeline end to end on an embedded broker (needs Java 17+ on the PATH). Its
# checkpoints and the Parquet table it prints stay in scratch/clickstream (git-ignored) until the
# next `make demo` or `make clean`.
demo: $(STAMP)
	rm -rf scratch/clickstream
	$(VPY) examples/clickstream/pipeline.py --work scratch/clickstream

# Also empties scratch/, where the README's and the docs' examples keep their files (its .gitignore
# stays), and removes the built docs site (under build/).
clean:
	rm -rf $(VENV) build *.egg-info
	find scratch -mindepth 1 -maxdepth 1 ! -name .gitignore -exec rm -rf {} +
