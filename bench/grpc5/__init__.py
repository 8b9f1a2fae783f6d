"""The 5.x gRPC benchmark (bench/grpc5_bench.py): raw-stub load generators and the phases."""
