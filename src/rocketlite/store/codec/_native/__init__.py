"""The store family's compiled twin, built at `pip install` (`setup.py`, an optional extension):
`_dispatch.pyx` (the record scan of dispatch and recovery, consume-queue units and index entries
from the log bytes, a pull's choice of units), its byte loops without the GIL. It has a `.pyi`
stub beside it for mypy. Nothing imports it but `store.codec.speedups`, which picks it over the
references of the same names, and the differential tests that pin it to them byte for byte.
"""
