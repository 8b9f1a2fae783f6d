"""rocketlite.spark (not built yet)."""
