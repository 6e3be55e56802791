"""The model: counts (pure data), memory traffic, timing, the seed baseline, and the one meeting point (engine)."""
