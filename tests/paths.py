"""Files outside tests/ that several tests run."""

import os

BENCHMARKS = os.path.join(os.path.dirname(__file__), "..", "benchmarks")
# the solve-time benchmark's CartPole config: tuned, with schedules fixed in updates
FAST_CONFIG = os.path.join(BENCHMARKS, "cartpole_fast.yaml")
