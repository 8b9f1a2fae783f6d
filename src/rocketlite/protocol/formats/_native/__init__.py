"""The formats family's compiled twins, built at `pip install` (`setup.py`, optional extensions):
`_record.pyx` (records encoded, placed, stamped and decoded; a batch body straight to records)
and `_send.pyx` (the send path's properties rewrite). Each has a `.pyi` stub beside it for mypy.
Nothing imports them but `protocol.formats.speedups`, which picks them over the references of
the same names, and the differential tests that pin them to the references byte for byte.
"""
