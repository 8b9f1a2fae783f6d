"""Peers of bench/peers_bench.py: RocketMQ, Kafka, NATS JetStream and Redis beside rocketlite."""
