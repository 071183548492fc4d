"""Where things are: tests/ itself (fakes.py and the test packages, which child processes
import from it), the repository root, and the files outside tests/ that several tests run."""

import importlib.util
import os

TESTS = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(TESTS)
BENCHMARKS = os.path.join(TESTS, "..", "benchmarks")
CLUSTER = os.path.join(ROOT, "cluster")
# the solve-time benchmark's CartPole config: tuned, with schedules fixed in updates
FAST_CONFIG = os.path.join(BENCHMARKS, "cartpole_fast.yaml")


def load_benchmark(name: str):
    """benchmarks/<name>.py imported as a module of that name (benchmarks/ is no package)."""
    spec = importlib.util.spec_from_file_location(name, os.path.join(BENCHMARKS, f"{name}.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
