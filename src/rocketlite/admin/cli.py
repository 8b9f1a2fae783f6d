"""Placeholder: the admin verbs are being built."""

from __future__ import annotations

import argparse
from typing import Any


def add_admin_parser(sub: Any) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = sub.add_parser("admin", help="mqadmin-style administration")
    return parser
