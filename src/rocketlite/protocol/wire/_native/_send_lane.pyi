"""Type stubs of the compiled lane gatherers (`_send_lane.pyx`)."""

from rocketlite.protocol.wire.send_lane import GatherRawSends, GatherSends

gather_sends: GatherSends
gather_raw_sends: GatherRawSends
