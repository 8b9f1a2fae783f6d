"""Crash harnesses: a store child killed mid-write (`store_child`, run as a script) and a broker
process killed with SIGKILL (`broker`)."""
