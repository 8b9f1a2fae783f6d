"""Benchmarks (run as scripts: `python bench/store_bench.py`)."""
