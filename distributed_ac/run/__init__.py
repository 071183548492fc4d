"""A run on disk: its directory, checkpoints and metrics."""
