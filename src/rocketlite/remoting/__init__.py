"""The asyncio side of the remoting protocol: connections, servers and a client, shared by the name
server, the broker and the client SDK. The codec itself is sans-IO in `rocketlite.protocol`."""
