"""gRPC over HTTP/2 on the caller's event loop: the compiled session of libnghttp2
(`_native/_h2.pyx`) and the asyncio server that serves gRPC methods over it (`server.py`)."""
