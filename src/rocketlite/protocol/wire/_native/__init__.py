"""The wire family's compiled twins, built at `pip install` (`setup.py`, optional extensions):
`_wire.pyx` (frames, JSON and ROCKETMQ headers, whole response frames) and `_headers.pyx` (the
SEND_MESSAGE_V2 and PULL_MESSAGE request headers). Each has a `.pyi` stub beside it for mypy.
Nothing imports them but `protocol.wire.speedups`, which picks them over the references of the
same names, and the differential tests that pin them to the references byte for byte.
"""
