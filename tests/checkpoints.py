"""What the exact-resume tests run and compare: a run in one go against the same run
stopped and resumed, tensor by tensor of their final checkpoints."""

import numpy as np
import tensorflow as tf

CLOCKS = ("wall_s", "worker_wait_s")


def checkpoint_tensors(summary) -> dict[str, np.ndarray]:
    """Every tensor of the run's final checkpoint except the clocks (wall time, the
    workers' waits) and TF's save counter."""
    reader = tf.train.load_checkpoint(summary["checkpoint"])
    return {name: reader.get_tensor(name) for name in reader.get_variable_to_shape_map()
            if not any(clock in name for clock in CLOCKS) and not name.startswith(("save_counter", "_CHECKPOINTABLE"))}


def once_and_resumed(run, root, k: int, m: int) -> tuple:
    """(root, once, first, resumed): `run(dir, updates, resume=False)` for k + m updates in
    one go, and for k updates then resumed to k + m in one run directory."""
    once = run(root / "once", k + m)
    first = run(root / "split", k)
    resumed = run(root / "split", k + m, resume=True)
    return root, once, first, resumed
