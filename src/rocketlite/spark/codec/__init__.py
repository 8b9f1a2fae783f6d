"""The Spark readers' and sink's byte codecs, with their compiled twins.

`columns_ref` (records as Arrow column buffers, the raw-store scan's record hops and checks) and
`digests_ref` (many BLAKE2b digests of one buffer, the sink's message ids) are the references;
`_native/_columns.pyx` and `_native/_digests.pyx` are their compiled twins; `speedups` picks
between them, and names the tier the columnar readers run on. The record format they read is
`protocol/formats/record.py`; they live here, next to Spark, because only Spark runs them.
"""
