"""Sans-IO RocketMQ: every format and every request, bytes in, objects out; no sockets, no asyncio.

The lowest layer (ARCHITECTURE.md): it imports nothing of rocketlite above it, and everything
else imports its formats from here.

Four families and the vocabulary they share (ARCHITECTURE.md, "protocol/ in families"):

- `wire/`: the 4.x remoting wire: frames, `RemotingCommand`, JSON and ROCKETMQ headers,
  `fastjson`, typed custom headers, the send answer as one frame, the 5.x POP headers and
  receipt handle, ACL request signatures;
- `formats/`: the bytes kept on disk and copied between brokers: the commit-log record (also the
  PULL body), the consume-queue unit, the index layout, the batch body, the HA frames;
- `bodies/`: JSON bodies (routes, clusters, topic configs, heartbeats, lists, queue tables);
- `requests/`: builds and parses every request a client sends;
- the vocabulary, at the top: `codes`, `message` (properties, sys flags, ids, hashes),
  `reserved` (system names), `perm`, `errors` (one root; subclasses carry response codes), and
  over the bodies `subscription` (tag expressions) and `no_route` (why a topic has no route).

`wire/` and `formats/` each have their compiled twins in `_native/` and a chooser,
`speedups.py`, reading the one switch in `rocketlite.native`; `_native/` here holds the Cython
includes every family's compiled modules share. `proto/` is the 5.x gRPC protocol (`.proto`).
"""
