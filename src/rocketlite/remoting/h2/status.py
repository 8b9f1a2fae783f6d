"""gRPC status codes the compiled HTTP/2 door answers with (grpc's `status.proto` numbering).

Kept apart from `server.py` so that `group.py`, which `server.py` imports, can name them without
an import cycle or a second copy.
"""

from __future__ import annotations

from typing import Final

OK: Final = 0
UNKNOWN: Final = 2
DEADLINE_EXCEEDED: Final = 4
RESOURCE_EXHAUSTED: Final = 8
UNIMPLEMENTED: Final = 12
INTERNAL: Final = 13
