"""The broker benchmark (bench/broker_bench.py) in parts: config, servers, loadgen, peers, report,
profiling, runner."""
