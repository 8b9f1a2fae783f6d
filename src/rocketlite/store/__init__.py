"""The message store: RocketMQ 4.x's commit log, consume queues, index files and checkpoint, byte
for byte. Knows nothing of the network."""
