"""Type stubs of the compiled lane gatherer (`_send_lane.pyx`)."""

from rocketlite.protocol.wire.send_lane import GatherSends

gather_sends: GatherSends
