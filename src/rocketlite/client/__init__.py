"""rocketlite.client (not built yet)."""
