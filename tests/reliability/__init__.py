"""Reliability tests: hostile input (fuzzing, slowloris, idle connections) and broker-process crashes."""
