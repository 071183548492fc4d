"""`dac export --format onnx`: the SavedModel's two signatures as two ONNX models.

The SavedModel (trained/savedmodel.py) is written to `OUT/saved_model`, then tf2onnx
converts each signature to its own file beside it:

    OUT/action.onnx   serving_default: the same inputs, output `action` (and `next_state`)
    OUT/value.onnx    value: the same inputs, output `value` (and `next_state`)

Inputs keep the SavedModel signature's names (`obs` or a Dict's keys, `action_mask`,
`state`), and so do outputs but one: a recurrent signature returns its new state as
`state`, the input's name, which an ONNX graph cannot hold twice (tf2onnx fails on it),
so in ONNX it is `next_state`. With onnxruntime:

    sess = onnxruntime.InferenceSession("OUT/action.onnx")
    action, = sess.run(["action"], {"obs": obs})
    action, state = sess.run(["action", "next_state"], {"obs": obs, "state": state})

tf2onnx (and onnxruntime to run the result) come with `pip install 'distributed_ac[onnx]'`;
they are used only here, when ONNX is asked for.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

from distributed_ac.core.errors import UsageError

OPSET = 17
MODELS = {"action.onnx": "serving_default", "value.onnx": "value"}
# an output that shares an input's name, as ONNX names it
RENAMED = {"state": "next_state"}


def require_tf2onnx() -> None:
    """One clear line when the onnx extra is not installed. Looked up, not imported:
    importing tf2onnx imports TensorFlow, seconds before the run is even read."""
    missing = [m for m in ("tf2onnx", "onnx") if importlib.util.find_spec(m) is None]
    if missing:
        raise UsageError(f"--format onnx needs {' and '.join(missing)}, not installed here; "
                         "pip install 'distributed_ac[onnx]'")


def onnx_outputs(saved_model: str | Path, signature: str) -> list[str]:
    """The signature's outputs as the ONNX model names them, in the order tf2onnx lists
    them (by name: tf2onnx flattens the signature's dict of outputs sorted by key)."""
    from tensorflow.core.protobuf import saved_model_pb2

    proto = saved_model_pb2.SavedModel()
    proto.ParseFromString((Path(saved_model) / "saved_model.pb").read_bytes())
    outputs = proto.meta_graphs[0].signature_def[signature].outputs
    return [RENAMED.get(name, name) for name in sorted(outputs)]


def convert(saved_model: str | Path, out: str | Path) -> dict[str, str]:
    """Each signature of the SavedModel at `saved_model` as an ONNX file in `out`."""
    require_tf2onnx()
    written = {}
    for file, signature in MODELS.items():
        path = Path(out) / file
        path.unlink(missing_ok=True)  # a previous export's file would pass for this one's
        done = subprocess.run(
            [sys.executable, "-m", "tf2onnx.convert", "--saved-model", str(saved_model),
             "--signature_def", signature, "--opset", str(OPSET), "--output", str(path),
             "--rename-outputs", ",".join(onnx_outputs(saved_model, signature))],
            capture_output=True, text=True)
        if done.returncode != 0 or not path.exists():
            tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
            raise UsageError(f"tf2onnx could not convert the {signature} signature: {tail}")
        written[file.removesuffix(".onnx")] = str(path)
    return written
