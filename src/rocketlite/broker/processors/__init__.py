"""The broker's request processors: one class per family of request codes, each built by the
controller with its collaborators (see `broker/requests.py` for which one serves which code)."""
