"""Sans-IO request layer: one builder and one parser per request a client sends, in the h11 spirit.

Every client of a broker or name server (the SDK in `rocketlite.client`, the admin CLI in
`rocketlite.admin`, the Spark data source and the test harnesses) sends the same few requests.
Their wire form lives here, once:

* a **builder** `build_X(...) -> RemotingCommand` turns plain values into a request command (code,
  header extFields, body), with opaque 0 and the default language; the transport stamps the opaque
  and may set the language;
* a **parser** `parse_X(response) -> typed result` reads the answer: the status the response code
  means, the header fields, the decoded body. A code the request cannot be answered with raises
  `ResponseError`, a `RocketliteError` carrying the response code and remark, which each caller
  maps to its own error type (`client.errors.for_code`, `admin.client.AdminError`).

Nothing here does I/O, reads a clock or keeps state: the caller supplies timestamps and decides the
policy (which broker, which route, retries, timeouts, what a refusal means to its user). Modules,
one per request family:

* `pull`      - PULL_MESSAGE: `build_pull`, `parse_pull` -> `PullResult` (status, offsets, body);
* `send`      - SEND_MESSAGE_V2 / SEND_BATCH_MESSAGE: `build_send`, `parse_send` -> `SendResponse`;
* `offsets`   - GET_MAX/MIN_OFFSET, SEARCH_OFFSET_BY_TIMESTAMP, GET_EARLIEST_MSG_STORETIME,
  QUERY/UPDATE_CONSUMER_OFFSET;
* `query`     - QUERY_MESSAGE (by key or UNIQ_KEY) and VIEW_MESSAGE_BY_ID;
* `route`     - GET_ROUTEINFO_BY_TOPIC and GET_ALL_TOPIC_LIST_FROM_NAMESERVER;
* `heartbeat` - HEART_BEAT and UNREGISTER_CLIENT;
* `response`  - `ResponseError` and `expect`, the check every parser starts with.

Only `protocol/` is imported: this package sits below `remoting/`.
"""
