"""Rollout worker pools: the Pool protocol, the serial pool, and the Ray pool (the
only module that imports Ray)."""
