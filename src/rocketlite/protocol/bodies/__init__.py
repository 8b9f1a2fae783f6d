"""JSON bodies of the remoting protocol, as fastjson writes and reads them.

`json_body` (the `JsonBody` base: the bean mapping, tolerant reading), `route` (routes, clusters,
topic configs, a broker's registration), `heartbeat` (a client's producer and consumer groups),
`lists` (topic lists, KV tables, a group's consumer ids), `message_queue` (the bodies built
around `MessageQueue`, where fastjson writes objects as map keys).
"""
