"""Writes into the run directory that fail naming the file they failed on.

The OS reports a full disk on write() or close(), not on open(), and Python's OSError
then carries no file name: `dac` could only say "[Errno 28] No space left on device".
TensorFlow's writers (checkpoints, TensorBoard events) raise their own errors instead,
which `dac` does not expect and prints as a traceback. Both become an OSError naming
the path, which `dac` reports in one line (commands/main.py). No TensorFlow import here:
its error classes are passed in by the modules that have it loaded.
"""

from __future__ import annotations

import contextlib
import errno
import os


@contextlib.contextmanager
def named(path: str | os.PathLike, tf_errors: tuple = ()):
    """Re-raise an OSError without a file name, or one of `tf_errors` (e.g.
    (tf.errors.OpError,)), as an OSError naming `path`."""
    try:
        yield
    except OSError as e:
        if e.filename is not None:
            raise
        raise OSError(e.errno, e.strerror or str(e), str(path)) from None
    except tf_errors as e:
        raise from_tf(e, path) from None


def from_tf(e: Exception, path: str | os.PathLike) -> OSError:
    """A TensorFlow file error as an OSError naming `path`. TensorFlow maps ENOSPC to
    RESOURCE_EXHAUSTED (its text names a temporary file of its own)."""
    if type(e).__name__ == "ResourceExhaustedError":
        return OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))
    text = str(getattr(e, "message", e)).strip()
    return OSError(errno.EIO, text.splitlines()[0] if text else type(e).__name__, str(path))
