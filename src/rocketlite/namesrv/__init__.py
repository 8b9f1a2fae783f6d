"""rocketlite.namesrv (not built yet)."""
