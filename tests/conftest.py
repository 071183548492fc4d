"""tests/unit: one piece in isolation (no Ray, no `dac` child process, no training run);
tests/e2e: Ray, the `dac` CLI in a child process, training, tuning, run directories end to
end. Both import the modules here, in tests/, as plain modules: fakes (small envs),
helpers (child processes, the CLI in this process, short quiet runs, run directories),
batches (weights, rollouts and learner readings), scripted_pool (the Trainer's loop without
Ray), checkpoints, failed_runs and paths."""

import os
import sys

# Quiet TensorFlow's C++ logging in test output; tests import fakes and helpers as plain
# modules from this directory.
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, os.path.dirname(__file__))
