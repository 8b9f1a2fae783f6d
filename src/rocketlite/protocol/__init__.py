"""Sans-IO RocketMQ: every format and every request, bytes in, objects out; no sockets, no asyncio.

The lowest layer (ARCHITECTURE.md): it imports nothing of rocketlite above it, and everything
else imports its formats from here.

- wire: `frame` (stream framing), `command` (RemotingCommand) with `header_codec`,
  `json_header_ref` and `fastjson` (JSON headers and bodies), `custom_header` and
  `headers` (typed extFields), `bodies/` (JSON bodies),
  `batch` (batch send bodies), `ha_frames` (replication), `acl_signature`;
- requests: `requests/` builds and parses every request a client sends;
- on disk: `record` (the commit-log record, also the PULL body) with `record_ref`,
  `consume_queue_unit`, `index_layout`;
- vocabulary: `codes`, `message` (properties, sys flags, ids, hashes), `reserved` (system names),
  `perm`, `subscription`, `errors` (one root; subclasses carry response codes);
- `speedups`: the one place that picks compiled or reference implementations.
"""
