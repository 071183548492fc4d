"""The CNN learner's dense layer in three matmul forms, and the whole Nature CNN with its
dense kernel in Keras's [F, U] layout or stored as [U, F]; one JSON line of ms per call.

    python benchmarks/notebook/start-up-and-dense/dense_forms.py --what dense --batch 256 --threads 1
    python benchmarks/notebook/start-up-and-dense/dense_forms.py --what cnn --batch 256 --threads 2 [--bfloat16]

Forms (dense, [B, 3136] x [3136, 512], forward and backward): `standard` (Keras's
layout), `copy_in_backward` (a custom gradient that makes a copy of W transposed for
dx = dy W^T), `kernel_u_f` (the kernel stored as [U, F], matmul with transpose_b). Each
is a tf.function, warmed up, then timed as the mean over `--calls` calls, in interleaved
rounds; the JSON holds every round's figure. Written up in docs/notes/start-up-and-dense.md.
"""

from __future__ import annotations

import argparse
import json
import os
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
F, U = 3136, 512


def _timed(f, calls: int) -> float:
    for _ in range(3):
        f()
    t0 = time.perf_counter()
    for _ in range(calls):
        f()
    return round((time.perf_counter() - t0) / calls * 1e3, 2)


def dense_forms(tf, batch: int) -> dict:
    x, dy = tf.random.normal([batch, F]), tf.random.normal([batch, U])
    w = tf.Variable(tf.random.normal([F, U]) * 0.01)
    w_t = tf.Variable(tf.transpose(w))

    @tf.custom_gradient
    def copy_in_backward(a, kernel):
        def grad(g):
            return tf.matmul(g, tf.transpose(kernel)), tf.matmul(a, g, transpose_a=True)
        return tf.matmul(a, kernel), grad

    def fwd_bwd(fn, var):
        @tf.function
        def f():
            with tf.GradientTape() as tape:
                tape.watch(x)
                y = fn(x, var)
            return tape.gradient(y, [x, var], output_gradients=dy)
        return f

    return {"standard": fwd_bwd(tf.matmul, w),
            "copy_in_backward": fwd_bwd(copy_in_backward, w),
            "kernel_u_f": fwd_bwd(lambda a, k: tf.matmul(a, k, transpose_b=True), w_t)}


def cnn_forms(tf, batch: int, dtype) -> dict:
    frames = tf.cast(tf.random.uniform([batch, 84, 84, 4], 0, 255, tf.int32), tf.uint8)
    shapes = ([8, 8, 4, 32], [4, 4, 32, 64], [3, 3, 64, 64])
    kernels = [tf.Variable(tf.random.normal(s) * 0.05) for s in shapes]
    biases = [tf.Variable(tf.zeros([s[-1]])) for s in shapes]
    w = tf.Variable(tf.random.normal([F, U]) * 0.01)
    w_t, b = tf.Variable(tf.transpose(w)), tf.Variable(tf.zeros([U]))

    def trunk():
        h = tf.cast(frames, dtype) * tf.cast(1 / 255, dtype)
        for k, bias, stride in zip(kernels, biases, (4, 2, 1)):
            h = tf.nn.convolution(h, tf.cast(k, dtype), stride, "VALID")
            h = tf.nn.relu(tf.nn.bias_add(h, tf.cast(bias, dtype)))
        return tf.reshape(h, [batch, F])

    def make(transposed: bool):
        var = w_t if transposed else w

        @tf.function
        def f():
            with tf.GradientTape() as tape:
                y = tf.matmul(trunk(), tf.cast(var, dtype), transpose_b=transposed)
                loss = tf.reduce_sum(tf.cast(tf.nn.relu(tf.nn.bias_add(y, tf.cast(b, dtype))),
                                             tf.float32))
            return tape.gradient(loss, kernels + biases + [var, b])
        return f

    return {"standard": make(False), "kernel_u_f": make(True)}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--what", choices=["dense", "cnn"], default="dense")
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--bfloat16", action="store_true")
    p.add_argument("--calls", type=int, default=20)
    p.add_argument("--rounds", type=int, default=3)
    args = p.parse_args()
    import tensorflow as tf

    tf.config.threading.set_intra_op_parallelism_threads(args.threads)
    tf.config.threading.set_inter_op_parallelism_threads(args.threads)
    dtype = tf.bfloat16 if args.bfloat16 else tf.float32
    forms = dense_forms(tf, args.batch) if args.what == "dense" else cnn_forms(tf, args.batch, dtype)
    ms = {name: [] for name in forms}
    for _ in range(args.rounds):
        for name, f in forms.items():
            ms[name].append(_timed(f, args.calls))
    print(json.dumps({"what": args.what, "batch": args.batch, "threads": args.threads,
                      "dtype": dtype.name, "ms_per_call": ms, "tensorflow": tf.__version__}))


if __name__ == "__main__":
    main()
