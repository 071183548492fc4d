"""TensorFlow's runtime: its import with the C++ start-up lines kept off the console
(real errors kept on it), and the learner's device.

Importing TensorFlow 2.21 (and its first device query) writes half a dozen lines to
file descriptor 2 from C++ (oneDNN, CUDA drivers, CPU features, cuInit) that
TF_CPP_MIN_LOG_LEVEL no longer silences. They are the first thing a user would read,
and they bury our own output. `load_tensorflow()` points fd 2 at a temporary file while
TensorFlow loads and queries its devices, then writes back every line that is not one
of those known start-up lines: an unknown line, a real error, still reaches stderr.
The learner's warm-up step (its first graph run, where oneDNN says what it falls back
on) is held alike; the known lines go to the run directory's startup.log.
"""

from __future__ import annotations

import contextlib
import glob
import os
import re
import sys
import tempfile
import threading

from distributed_ac.core.errors import DeviceError

# Each pattern is one known, harmless start-up line (matched anywhere in the line).
KNOWN_LINES = (
    r"^WARNING: All log messages before absl::InitializeLog\(\) is called are written to STDERR",
    r"port\.cc:\d+\] oneDNN custom operations are on",
    r"cudart_stub\.cc:\d+\] Could not find cuda drivers on your machine",
    r"cpu_feature_guard\.cc:\d+\] This TensorFlow binary is optimized to use available CPU",
    r"^To enable the following instructions: .* in other operations, rebuild TensorFlow",
    r"Unable to register cu(DNN|FFT|BLAS) factory",
    r"computation placer already registered",
    r"TF-TRT Warning: Could not find TensorRT",
    # oneDNN's first bool op on a CPU without AVX-512 (an E line, but not an error)
    r"oneDNN supports DT_BOOL only on platforms with AVX-512",
)
# Without any NVIDIA device, cuInit failing is the expected way of finding no GPU; with
# one, it is the reason the GPU goes unused, and the user must see it.
NO_GPU_LINES = (r"cuda_platform\.cc:\d+\] failed call to cuInit",)

_lock = threading.Lock()  # fd 2 is process-wide: one redirection at a time
_held: list[str] = []  # the known lines kept off the console, for the run's startup.log


def held_lines() -> list[str]:
    """The known start-up lines this process kept off the console so far, in order."""
    return list(_held)


def has_nvidia_device() -> bool:
    """Whether this machine has an NVIDIA GPU device node (no TensorFlow needed to ask)."""
    return bool(glob.glob("/dev/nvidia[0-9]*"))


def _known() -> re.Pattern:
    patterns = KNOWN_LINES + (NO_GPU_LINES if not has_nvidia_device() else ())
    return re.compile("|".join(f"(?:{p})" for p in patterns))


@contextlib.contextmanager
def quiet_startup_lines():
    """Hold fd 2 in a temporary file; afterwards write back what is not a known line.

    Output of other threads in the meantime (Ray starting on the main thread) is held
    too and comes out afterwards, in order, unless it is one of the known lines."""
    with _lock, tempfile.TemporaryFile() as held:
        sys.stderr.flush()
        saved = os.dup(2)
        os.dup2(held.fileno(), 2)
        try:
            yield
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            held.seek(0)
            known = _known()
            text = held.read().decode("utf-8", errors="replace")
            lines = text.splitlines(keepends=True)
            kept = [line for line in lines if not known.search(line)]
            _held.extend(line for line in lines if known.search(line))
            if kept:
                sys.stderr.write("".join(kept))
                sys.stderr.flush()


ONEDNN = "TF_ENABLE_ONEDNN_OPTS"  # read once, when TensorFlow is imported


def load_tensorflow(cnn: bool = False):
    """Import TensorFlow (and Keras) and list its devices, with the start-up lines held.

    `cnn`: this process will train a CNN. Where no GPU will run it, oneDNN's kernels are
    turned on (TF_ENABLE_ONEDNN_OPTS=1, unless it is set already): TensorFlow's CPU
    builds leave them off on CPUs without AVX-512, where they take a Nature CNN's
    backward pass ~1.3-1.8x faster but an MLP's or an LSTM's step ~15% slower
    (docs/notes/recurrent-speed.md). Only the import reads it."""
    if "tensorflow" in sys.modules and "keras" in sys.modules:
        return sys.modules["tensorflow"]
    if cnn and "tensorflow" not in sys.modules and not has_nvidia_device():
        os.environ.setdefault(ONEDNN, "1")
    with quiet_startup_lines():
        import keras  # noqa: F401  Keras' import runs TensorFlow's
        import tensorflow as tf

        tf.config.list_physical_devices("GPU")  # cuInit's line comes from the first query
    return tf


def pick_device(choice: str) -> str:
    """'/GPU:0' when asked for or auto with a visible GPU, else '/CPU:0'."""
    import tensorflow as tf

    gpus = tf.config.list_physical_devices("GPU")
    if choice == "gpu" and not gpus:
        raise DeviceError("--device gpu: TensorFlow sees no GPU on this machine (is "
                          "tensorflow[and-cuda] installed, `pip install -e \".[gpu]\"`?)")
    return "/GPU:0" if gpus and choice != "cpu" else "/CPU:0"
