"""The compiled data plane: Cython twins of the hot-path codecs, built at `pip install`.

Each `.pyx` module here compiles to an extension module (`setup.py` builds every one it finds,
as optional extensions, so a machine without a C compiler still installs, with the Python
implementations). Each has a `.pyi` stub beside it for mypy. Nothing imports these modules but
`protocol.speedups`, which picks them over the Python implementations of the same names, and the
differential tests that pin them to the references byte for byte.
"""
