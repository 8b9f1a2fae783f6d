"""The byte formats RocketMQ keeps on disk and copies between brokers, each declared once.

`record` (the commit-log record, also the body of a PULL answer), `consume_queue_unit` (the
20-byte consume-queue unit), `index_layout` (the index file), `batch` (the SEND_BATCH_MESSAGE
body, and a batch straight to records), `ha_frames` (HA replication). Each module's docstring is
its layout. `record_ref` (with `record.place_record`, `record.decode_records`) holds the
references of the compiled record codec (`_native/_record.pyx`); `speedups` picks between them
(and between `message.send_properties` and its twin `_native/_send.pyx`).
"""
