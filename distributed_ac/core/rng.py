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
