"""Sans-IO RocketMQ 4.x remoting protocol: bytes in, commands out; no sockets, no asyncio, no globals.

Modules: `codes` (request/response/language/serialize-type numbers), `command` (RemotingCommand and
its JSON / ROCKETMQ header forms), `frame` (stream framing), `headers` (typed extFields),
`fastjson` (Java-compatible JSON), `json_body` / `bodies` / `message_queue_bodies` (JSON bodies),
`batch` (batch sends), `requests` (build/parse of the requests clients send).

This file imports nothing on purpose: `rocketlite.protocol.errors` imports `protocol.codes`, and the other
modules import `rocketlite.protocol.errors`, so re-exports here would make an import cycle.
"""
