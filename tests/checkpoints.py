"""What the exact-resume tests compare: every tensor of a run's final checkpoint."""

import numpy as np
import tensorflow as tf


def checkpoint_tensors(summary) -> dict[str, np.ndarray]:
    """Every tensor of the run's final checkpoint except the clock and TF's save counter."""
    reader = tf.train.load_checkpoint(summary["checkpoint"])
    return {name: reader.get_tensor(name) for name in reader.get_variable_to_shape_map()
            if "wall_s" not in name and not name.startswith(("save_counter", "_CHECKPOINTABLE"))}
