"""`Caller`: the client end of a request as the broker's typed cores see it (`remoting.peer.Peer`),
for tests that call a core directly: an address, a client id, and the requests the broker pushed
to it, kept in order."""

from __future__ import annotations

from typing import Any

from rocketlite.remoting.peer import Push


class Caller:
    """A client at `address` (born host of what it sends) that records what is pushed to it."""

    def __init__(self, address: str = "10.1.2.3:40000", client_id: str = "10.1.2.3@core-test") -> None:
        self.remote_address = address
        self.client_id = client_id
        self.attrs: dict[str, Any] = {}
        self.closed = False
        self.pushed: list[Push] = []

    def push(self, request: Push) -> None:
        if not self.closed:
            self.pushed.append(request)

    def close(self) -> None:
        self.closed = True
