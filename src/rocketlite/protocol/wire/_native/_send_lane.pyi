"""Type stubs of the compiled 4.x lanes (`_send_lane.pyx`: the send gatherers, the pull reader and answer)."""

from rocketlite.protocol.wire.batch_lane import ReadRawBatch
from rocketlite.protocol.wire.pull_lane import EncodePullFound, ReadRawPull
from rocketlite.protocol.wire.send_lane import GatherRawSends, GatherSends

gather_sends: GatherSends
gather_raw_sends: GatherRawSends
read_raw_pull: ReadRawPull
encode_pull_found: EncodePullFound
read_raw_batch: ReadRawBatch
