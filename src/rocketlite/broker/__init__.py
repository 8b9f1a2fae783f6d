"""rocketlite.broker (not built yet)."""
