"""Cost per frame of the workers' NumPy CNN (numpy_cnn.py) on Atari-sized uint8 frames,
and where the time goes, layer by layer. One JSON line per (torso, batch size).

    taskset -c 0 python benchmarks/notebook/pixels/numpy_cnn.py [--batches 32 256] [--torso nature impala]

BLAS is held to one thread (a rollout worker's share). Per layer, `im2col_us` is the
sliding-window copy (with the uint8 -> float32 cast on the first layer), `matmul_us` the
one BLAS call plus bias, `relu_us` the activation; the `whole_*` figures time the
policy's forward pass as the workers run it (NumpyTorso, blocks of numpy_cnn.BLOCK
frames), and the per-layer figures one pass of a whole batch through the same steps.
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from distributed_ac.models import cnn as numpy_cnn
from distributed_ac.models.cnn import NumpyTorso, relu

SHAPE = (84, 84, 4)


def random_params(kind: str, rng) -> list[np.ndarray]:
    """Arrays of the torso's bundle shapes (their values do not change the cost)."""
    shapes, c, hw = [], SHAPE[2], SHAPE[0]
    if kind == "nature":
        for filters, k, s in numpy_cnn.NATURE_CONVS:
            shapes += [(k, k, c, filters), (filters,)]
            c, hw = filters, (hw - k) // s + 1
        shapes += [(hw * hw * c, numpy_cnn.NATURE_DENSE), (numpy_cnn.NATURE_DENSE,)]
    else:
        for ch in numpy_cnn.IMPALA_CHANNELS:
            shapes += [(3, 3, c, ch), (ch,)] + [(3, 3, ch, ch), (ch,)] * 2 * numpy_cnn.IMPALA_BLOCKS
            c, hw = ch, -(-hw // 2)
        shapes += [(hw * hw * c, numpy_cnn.IMPALA_DENSE), (numpy_cnn.IMPALA_DENSE,)]
    return [(rng.standard_normal(s) * 0.05).astype(np.float32) for s in shapes]


def best_of(fn, repeats: int) -> float:
    """Fastest of `repeats` calls, in microseconds (the machine's noise only adds)."""
    best = float("inf")
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best * 1e6


def nature_layers(torso: NumpyTorso, x: np.ndarray, repeats: int) -> list[dict]:
    """Each Nature layer's steps timed on their own, on the real intermediate arrays."""
    rows = []
    for i, conv in enumerate(torso.convs):
        s, k = conv.stride, conv.k
        win = sliding_window_view(x, (k, k), axis=(1, 2))[:, ::s, ::s].transpose(0, 1, 2, 4, 5, 3)
        cols = np.empty(win.shape, np.float32)
        w = conv.w_uint8 if x.dtype == np.uint8 else conv.w
        flat = cols.reshape(-1, w.shape[0])
        im2col = best_of(lambda: np.copyto(cols, win), repeats)
        matmul = best_of(lambda: flat @ w + conv.b, repeats)
        y = (flat @ w + conv.b).reshape(*win.shape[:3], -1)
        rows.append({"layer": f"conv{i}", "patch_matrix": list(flat.shape),
                     "im2col_us": round(im2col, 1), "matmul_us": round(matmul, 1),
                     "relu_us": round(best_of(lambda: relu(y.copy()), repeats)
                                      - best_of(lambda: y.copy(), repeats), 1),
                     "mflop_per_frame": round(2 * flat.shape[0] * w.size / len(x) / 1e6, 2)})
        x = relu(y)
    flat = x.reshape(len(x), -1)
    rows.append({"layer": "dense", "patch_matrix": list(flat.shape), "im2col_us": 0.0,
                 "matmul_us": round(best_of(lambda: flat @ torso.dense_w + torso.dense_b,
                                            repeats), 1),
                 "mflop_per_frame": round(2 * torso.dense_w.size / 1e6, 2)})
    return rows


def measure(kind: str, batch: int, repeats: int) -> dict:
    rng = np.random.default_rng(0)
    torso = NumpyTorso(kind, random_params(kind, rng))
    x = rng.integers(0, 256, (batch, *SHAPE), dtype=np.uint8)
    torso(x)  # first touch of every buffer
    whole = best_of(lambda: torso(x), repeats)
    out = {"bench": "numpy_cnn", "torso": kind, "obs": list(SHAPE), "batch": batch,
           "block": numpy_cnn.BLOCK, "blas_threads": 1, "whole_us": round(whole, 1),
           "us_per_frame": round(whole / batch, 1),
           "frames_per_s": round(batch / whole * 1e6, 1)}
    if kind == "nature":
        out["layers"] = nature_layers(torso, x, repeats)
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--batches", type=int, nargs="+", default=[32, 256])
    p.add_argument("--torso", nargs="+", default=["nature"], choices=["nature", "impala"])
    p.add_argument("--repeats", type=int, default=7)
    args = p.parse_args()
    try:
        from threadpoolctl import threadpool_limits

        threadpool_limits(limits=1)
    except ImportError:
        pass
    for kind in args.torso:
        for batch in args.batches:
            print(json.dumps(measure(kind, batch, args.repeats)), flush=True)


if __name__ == "__main__":
    main()
