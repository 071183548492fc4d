"""A NumPy Generator's state as plain words, so checkpoints can hold it as a tensor.

No TensorFlow here: the serial pool and the driver's RunState use it too.
"""

from __future__ import annotations

import numpy as np

_MASK64 = (1 << 64) - 1


def generator_words(gen: np.random.Generator) -> np.ndarray:
    """A PCG64 Generator's full state as 6 uint64 words (its 128-bit ints split in two)."""
    s = gen.bit_generator.state
    if s["bit_generator"] != "PCG64":
        raise TypeError(f"only PCG64 generators are checkpointed, not {s['bit_generator']}")
    st, inc = s["state"]["state"], s["state"]["inc"]
    return np.array([st >> 64, st & _MASK64, inc >> 64, inc & _MASK64,
                     s["has_uint32"], s["uinteger"]], dtype=np.uint64)


def set_generator_words(gen: np.random.Generator, words: np.ndarray) -> None:
    w = [int(x) for x in np.asarray(words, dtype=np.uint64)]
    gen.bit_generator.state = {"bit_generator": "PCG64",
                               "state": {"state": (w[0] << 64) | w[1], "inc": (w[2] << 64) | w[3]},
                               "has_uint32": w[4], "uinteger": w[5]}


def sub_env_streams(run_seed: int, first: int, n: int
                    ) -> tuple[list[int], list[np.random.Generator]]:
    """The env seeds and action-sampling streams of sub-envs first .. first + n - 1.

    Each comes from the sub-env's index in the run (a SeedSequence spawn key), not from
    the worker that steps it, so a run draws the same numbers however its sub-envs are
    split over workers. The env's seed and the sampling stream are separate children:
    an env seeded with the very seed of a sampling Generator would draw its reset noise
    from the words that Generator turns into action noise. Env seeds are below 2**31:
    evaluation plays on the seeds from 2**31 up, which training never uses."""
    env_seeds, streams = [], []
    for g in range(first, first + n):
        env_part, action_part = np.random.SeedSequence(run_seed, spawn_key=(g,)).spawn(2)
        env_seeds.append(int(env_part.generate_state(1)[0]) >> 1)
        streams.append(np.random.Generator(np.random.PCG64(action_part)))
    return env_seeds, streams


def draw_rows(streams: list[np.random.Generator], kind: str, steps: int,
              width: int) -> np.ndarray:
    """[steps, len(streams), width] float32 draws, row i from streams[i] in step order:
    `kind` "normal" (standard normal) or "uniform" ([0, 1)). One call per stream for a
    whole rollout, so a stream per sub-env costs next to nothing per step; made contiguous
    by step, so each step's [len(streams), width] rows are one block."""
    out = np.empty((len(streams), steps, width), np.float32)
    for gen, rows in zip(streams, out):
        if kind == "normal":
            gen.standard_normal(dtype=np.float32, out=rows)
        else:
            gen.random(dtype=np.float32, out=rows)
    return np.ascontiguousarray(out.transpose(1, 0, 2))
