"""The index files under `{storeRoot}/index` (RocketMQ's `store.index` package): `file.py`, one
file's hash index from message keys to commit-log offsets, and `service.py`, the list of them, fed
by the dispatcher and queried by QUERY_MESSAGE."""
