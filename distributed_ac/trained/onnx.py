"""`dac export --format onnx`: the SavedModel's two signatures as two ONNX models.

The SavedModel (trained/savedmodel.py) is written to `OUT/saved_model`, then tf2onnx
converts each signature to its own file beside it:

    OUT/action.onnx   serving_default: the same inputs, output `action` (and `state`)
    OUT/value.onnx    value: the same inputs, output `value` (and `state`)

Inputs and outputs keep the SavedModel signature's names, so with onnxruntime:

    sess = onnxruntime.InferenceSession("OUT/action.onnx")
    action, = sess.run(["action"], {"obs": obs})

tf2onnx (and onnxruntime to run the result) come with `pip install 'distributed_ac[onnx]'`;
they are imported only here, when ONNX is asked for.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from distributed_ac.core.errors import UsageError

OPSET = 17
MODELS = {"action.onnx": "serving_default", "value.onnx": "value"}


def require_tf2onnx() -> None:
    """One clear line when the onnx extra is not installed."""
    try:
        import tf2onnx  # noqa: F401
    except ImportError as e:
        raise UsageError(f"--format onnx needs tf2onnx ({e}); "
                         "pip install 'distributed_ac[onnx]'") from None


def convert(saved_model: str | Path, out: str | Path) -> dict[str, str]:
    """Each signature of the SavedModel at `saved_model` as an ONNX file in `out`."""
    require_tf2onnx()
    written = {}
    for file, signature in MODELS.items():
        path = Path(out) / file
        done = subprocess.run(
            [sys.executable, "-m", "tf2onnx.convert", "--saved-model", str(saved_model),
             "--signature_def", signature, "--opset", str(OPSET), "--output", str(path)],
            capture_output=True, text=True)
        if done.returncode != 0 or not path.exists():
            tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
            raise UsageError(f"tf2onnx could not convert the {signature} signature: {tail}")
        written[file.removesuffix(".onnx")] = str(path)
    return written
