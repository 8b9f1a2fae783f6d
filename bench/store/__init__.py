"""The store benchmark (bench/store_bench.py) in parts: common, limits, appends, sync, reads."""
