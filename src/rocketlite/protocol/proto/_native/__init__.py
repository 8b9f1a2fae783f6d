"""The gRPC delivery family's compiled twin, built at `pip install` (`setup.py`, optional
extension): `_delivery.pyx` (a popped record to its `ReceiveMessageResponse` bytes), with a `.pyi`
stub beside it for mypy. Nothing imports it but `protocol.proto.speedups`, which picks it over the
reference of the same name, and the differential test that pins the two byte for byte.
"""
