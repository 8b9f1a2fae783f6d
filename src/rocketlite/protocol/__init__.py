"""Sans-IO RocketMQ 4.x remoting protocol: bytes in, commands out; no sockets, no asyncio."""
