"""`dac export --format onnx`: onnxruntime's actions and values equal the SavedModel's on
the same random inputs, for a vector, an image (each CNN torso), a masked, a recurrent
policy and other action and observation spaces; the ONNX models' input and output names are the documented ones; a missing onnx
extra is one line and exit 2."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import python, train_quietly

from distributed_ac.commands.main import main
from distributed_ac.config.schema import Config

ort = pytest.importorskip("onnxruntime")
pytest.importorskip("tf2onnx")
tf = pytest.importorskip("tensorflow")

SMALL = dict(serial=True, num_workers=1, mode="sync", envs_per_worker=2, rollout_length=8,
             hidden_sizes=(16,), total_env_steps=2 * 16, checkpoint_every=1, log_every_s=0.01)
B = 256
MASKED = "distributed_ac.envs.choices:MaskedChoice"


def _export(tmp_path, cfg):
    run_dir = tmp_path / "run"
    train_quietly(cfg, run_dir)
    out = tmp_path / "model"
    assert main(["export", str(run_dir), "--out", str(out), "--format", "onnx"]) == 0
    return (tf.saved_model.load(str(out / "saved_model")),
            ort.InferenceSession(str(out / "action.onnx")),
            ort.InferenceSession(str(out / "value.onnx")))


def _names(session) -> tuple[list[str], list[str]]:
    """Its input and output names, sorted: onnxruntime feeds and fetches by name."""
    return (sorted(i.name for i in session.get_inputs()),
            sorted(o.name for o in session.get_outputs()))


def _same_values(val, m, feed: dict, *args):
    np.testing.assert_allclose(val.run(["value"], feed)[0], m.value(*args).numpy(),
                               rtol=1e-5, atol=1e-5)


@pytest.fixture(scope="module")
def vector_run(tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("vector") / "run"
    train_quietly(Config(env="CartPole-v1", **SMALL), run_dir)
    return run_dir


def test_a_vector_policy_runs_the_same_in_onnxruntime(vector_run, tmp_path):
    out = tmp_path / "model"
    assert main(["export", str(vector_run), "--out", str(out), "--format", "onnx"]) == 0
    m = tf.saved_model.load(str(out / "saved_model"))
    act, val = (ort.InferenceSession(str(out / f)) for f in ("action.onnx", "value.onnx"))
    assert _names(act) == (["obs"], ["action"]) and _names(val) == (["obs"], ["value"])
    obs = np.random.default_rng(0).normal(size=(B, 4)).astype(np.float32)
    a = act.run(["action"], {"obs": obs})[0]
    assert len(np.unique(a)) == 2  # random weights on normal inputs: both actions chosen
    np.testing.assert_array_equal(a, m.action(obs).numpy())
    _same_values(val, m, {"obs": obs}, obs)


@pytest.mark.parametrize("torso", ["nature", "impala", "small"])
def test_an_image_policy_takes_uint8_frames_in_onnxruntime(torso, tmp_path):
    m, act, val = _export(tmp_path, Config(env="fakes:PixelChase", torso=torso, **SMALL))
    assert _names(act) == (["obs"], ["action"]) and _names(val) == (["obs"], ["value"])
    assert act.get_inputs()[0].type == "tensor(uint8)"
    frames = np.random.default_rng(0).integers(0, 256, (B, 36, 36, 1), dtype=np.uint8)
    np.testing.assert_array_equal(act.run(["action"], {"obs": frames})[0],
                                  m.action(frames).numpy())
    _same_values(val, m, {"obs": frames}, frames)


def test_a_masked_policy_never_chooses_a_masked_action_in_onnxruntime(tmp_path):
    m, act, val = _export(tmp_path, Config(env=MASKED, **SMALL))
    assert _names(act) == (["action_mask", "obs"], ["action"])
    rng = np.random.default_rng(0)
    obs = rng.normal(size=(B, 6)).astype(np.float32)
    legal = rng.random((B, 6)) < 0.4
    legal[np.arange(B), rng.integers(0, 6, B)] = True  # at least one allowed a row
    mask = legal.astype(np.float32)
    a = act.run(["action"], {"obs": obs, "action_mask": mask})[0]
    np.testing.assert_array_equal(a, m.action(obs, mask).numpy())
    assert legal[np.arange(B), a].all()
    free = act.run(["action"], {"obs": obs, "action_mask": np.ones_like(mask)})[0]
    assert (free != a).any()  # the mask changed some choices: it is not ignored
    _same_values(val, m, {"obs": obs}, obs)


@pytest.mark.parametrize("core, width", [("lstm", 16), ("gru", 8)])
def test_a_recurrent_policy_takes_and_returns_its_state_in_onnxruntime(core, width, tmp_path):
    m, act, val = _export(tmp_path, Config(env="CartPole-v1", core=core, core_size=8, **SMALL))
    # the new state is `next_state`: ONNX cannot name an output as its input `state`
    assert _names(act) == (["obs", "state"], ["action", "next_state"])
    assert _names(val) == (["obs", "state"], ["next_state", "value"])
    rng = np.random.default_rng(0)
    obs = rng.normal(size=(B, 4)).astype(np.float32)
    state = rng.normal(size=(B, width)).astype(np.float32)
    feed = {"obs": obs, "state": state}
    a, s = act.run(["action", "next_state"], feed)
    ta, ts = m.action(obs, state)
    np.testing.assert_array_equal(a, ta.numpy())
    np.testing.assert_allclose(s, ts.numpy(), rtol=1e-5, atol=1e-5)
    assert not np.allclose(s, state, atol=1e-2)  # the state moved: it is the new one
    v, vs = val.run(["value", "next_state"], feed)
    tv, tvs = m.value(obs, state)
    np.testing.assert_allclose(v, tv.numpy(), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(vs, tvs.numpy(), rtol=1e-5, atol=1e-5)


def _random_feed(session, rng) -> dict:
    """Random inputs of each ONNX input's type and shape (a free dimension: B), small
    integers where an index is expected (a Discrete entry is one-hot inside)."""
    feed = {}
    for i in session.get_inputs():
        shape = [d if isinstance(d, int) else B for d in i.shape]
        feed[i.name] = (rng.integers(0, 256, shape, dtype=np.uint8) if i.type == "tensor(uint8)"
                        else rng.integers(0, 4, shape) if i.type == "tensor(int64)"
                        else rng.normal(size=shape).astype(np.float32))
    return feed


@pytest.mark.parametrize("env, action_type", [
    ("Pendulum-v1", "tensor(float)"),  # Box actions: tanh(mean) rescaled
    ("distributed_ac.envs.choices:MultiChoice", "tensor(int32)"),  # MultiDiscrete
    ("distributed_ac.envs.choices:DictChoice", "tensor(int64)"),  # Dict: Discrete, MultiBinary
    ("distributed_ac.envs.choices:ImageVectorChoice", "tensor(int64)")])  # Dict: image, Box
def test_other_spaces_run_the_same_in_onnxruntime(env, action_type, tmp_path):
    """Fed by the ONNX models' own input names, into the SavedModel's signatures too."""
    m, act, val = _export(tmp_path, Config(env=env, **SMALL))
    assert act.get_outputs()[0].type == action_type
    feed = _random_feed(act, np.random.default_rng(0))
    tf_feed = {k: tf.constant(v) for k, v in feed.items()}
    a = act.run(["action"], feed)[0]
    np.testing.assert_allclose(a, m.signatures["serving_default"](**tf_feed)["action"].numpy(),
                               rtol=1e-5, atol=1e-5)
    v = val.run(["value"], feed)[0]
    np.testing.assert_allclose(v, m.signatures["value"](**tf_feed)["value"].numpy(),
                               rtol=1e-5, atol=1e-5)


# main() in a child that cannot import `module`, then whether TensorFlow was loaded
WITHOUT = ("import sys; sys.modules[sys.argv[1]] = None; "
           "from distributed_ac.commands.main import main; code = main(sys.argv[2:]); "
           "print(code, 'tensorflow' in sys.modules)")


@pytest.mark.parametrize("module", ["tf2onnx", "onnx"])
def test_without_the_onnx_extra_export_says_so_in_one_line(module, vector_run, tmp_path):
    out = tmp_path / "model"
    done = python("-c", WITHOUT, module, "export", str(vector_run), "--out", str(out),
                  "--format", "onnx", timeout=300)
    assert done.stdout.split()[-2:] == ["2", "False"], (done.stdout, done.stderr[-2000:])
    assert "Traceback" not in done.stderr, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith(f"dac: error: --format onnx needs {module}"), lines
    assert "pip install 'distributed_ac[onnx]'" in lines[0]
    assert not out.exists()  # refused before anything was written
