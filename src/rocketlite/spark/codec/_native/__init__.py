"""The Spark family's compiled twins, built at `pip install` (`setup.py`, optional extensions):
`_columns.pyx` (records straight into Arrow column buffers, the raw-store scan) and
`_digests.pyx` (many BLAKE2b digests in one call, the sink's message ids). Each has a `.pyi` stub
beside it for mypy. Nothing imports them but `spark.codec.speedups`, which picks them over the
references of the same names, and the differential tests that pin them to the references.
"""
