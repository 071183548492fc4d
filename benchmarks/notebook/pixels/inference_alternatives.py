"""Where should a pixel policy's forward pass run? Cost per frame of the Nature CNN torso
on uint8 84 x 84 x 4 frames, three ways, on one thread each, one JSON line per
(way, batch size):

- numpy: the workers' NumPy CNN (numpy_cnn.NumpyTorso), what a rollout worker runs now;
- tf_float32: the learner's Keras torso in a tf.function, float32: the cost a
  SEED-style central inference (workers send frames, the learner's process runs the
  policy for all of them) would add to the learner's process;
- tf_bfloat16: the same under Keras mixed precision (--cnn-precision bfloat16).

    taskset -c 0 python benchmarks/notebook/pixels/inference_alternatives.py [--batches 8 32 256]

Batch 8 is one worker's envs in the Atari preset; 256 is what a central inference server
could gather from 32 such workers. Each figure is the fastest of --repeats calls.
"""

from __future__ import annotations

import argparse
import json
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402
from numpy_cnn import SHAPE, best_of, random_params  # noqa: E402  (benchmarks/notebook/pixels/numpy_cnn.py)

from distributed_ac.models.cnn import NumpyTorso  # noqa: E402


def numpy_forward(params: list[np.ndarray]):
    torso = NumpyTorso("nature", params)
    return torso


def tf_forward(params: list[np.ndarray], precision: str):
    import tensorflow as tf

    from distributed_ac.models import keras_cnn

    torso = keras_cnn.make_torso("nature", f"torso_{precision}", 0, precision)
    torso(np.zeros((1, *SHAPE), np.uint8))  # build, then load the same arrays
    for var, arr in zip(torso.bundle_variables, params):
        var.assign(arr)
    fn = tf.function(lambda x: torso(x))
    return lambda x: fn(x).numpy()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--batches", type=int, nargs="+", default=[8, 32, 256])
    ap.add_argument("--repeats", type=int, default=20)
    args = ap.parse_args()
    import tensorflow as tf

    tf.config.threading.set_intra_op_parallelism_threads(1)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    rng = np.random.default_rng(0)
    params = random_params("nature", rng)
    ways = {"numpy": numpy_forward(params), "tf_float32": tf_forward(params, "float32"),
            "tf_bfloat16": tf_forward(params, "bfloat16")}
    for batch in args.batches:
        x = rng.integers(0, 256, (batch, *SHAPE), dtype=np.uint8)
        ref = ways["numpy"](x)
        for way, fn in ways.items():
            out = fn(x)  # traced / warmed once before timing
            us = best_of(lambda: fn(x), args.repeats)
            print(json.dumps({"way": way, "batch": batch, "us_per_frame": round(us / batch, 1),
                              "frames_per_s": round(batch / us * 1e6),
                              "max_abs_diff_vs_numpy": float(np.abs(out - ref).max())}),
                  flush=True)


if __name__ == "__main__":
    main()
