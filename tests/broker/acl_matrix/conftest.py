"""The matrix's broker, one for the package (matrix.py)."""

from tests.broker.acl_matrix.matrix import acl_cluster, bind_global_white

__all__ = ["acl_cluster", "bind_global_white"]
