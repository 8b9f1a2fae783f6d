"""Controller mode under test: etcd members, controllers and broker replicas as processes
(cluster.py), each in a network namespace of its own (netns.py), and the partition scenarios and
their checker (partitions.py)."""
