"""The compiled HTTP/2 core of the 5.x gRPC endpoint, built at `pip install` against libnghttp2
(`setup.py`; optional where its headers are missing): `_h2.pyx`, a server session fed and drained
as bytes, with gRPC's message framing and trailers. It has a `.pyi` stub beside it for mypy. Only
`remoting.h2.server` imports it; without it the broker serves 5.x on grpc.aio and says so.
"""
