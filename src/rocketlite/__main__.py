"""`python -m rocketlite`."""

from __future__ import annotations

import sys

from rocketlite.cli import main

sys.exit(main())
