"""Image observations: the CNN torsos, uint8 from the env to the learner's graph, the
workers' NumPy CNN against Keras, the shared CNN trunk, refusals, and a CNN run's
checkpoint through resume, evaluate and export (fakes.PixelChase, 36 x 36 x 1 uint8)."""

import io
import os
import pickle
import signal
from functools import partial

import numpy as np
import pytest
import tensorflow as tf
from batches import policy_of, spy_on_step_inputs
from checkpoints import checkpoint_tensors, once_and_resumed
from helpers import train_updates

from distributed_ac.acting.numpy_policy import Policy
from distributed_ac.acting.worker import RolloutWorker
from distributed_ac.commands import main as cli
from distributed_ac.config.schema import Config
from distributed_ac.core.batch import Batch
from distributed_ac.core.errors import ConfigError
from distributed_ac.envs.space import EnvSpace
from distributed_ac.envs.vector import probe_space
from distributed_ac.learning.learner import Learner
from distributed_ac.models.cnn import bundle_size, max_pool_3x3_s2_same
from distributed_ac.models.spec import encoder_for
from distributed_ac.run.metrics import ConsoleProgress

PIXELS = "fakes:PixelChase"


def image_space(shape, num_actions=6) -> EnvSpace:
    return EnvSpace("images", int(np.prod(shape)), True, num_actions, obs_shape=shape,
                    obs_dtype="uint8")


@pytest.mark.parametrize("topology", ["separate", "shared"])
@pytest.mark.parametrize("torso, shape", [("nature", (84, 84, 4)), ("nature", (36, 36, 1)),
                                          ("impala", (84, 84, 4)), ("impala", (21, 21, 3)),
                                          ("small", (10, 10, 4)), ("small", (7, 7, 3))])
def test_numpy_cnn_policy_matches_keras_within_1e5(torso, shape, topology):
    learner = Learner(Config(torso=torso, topology=topology), image_space(shape))
    policy = Policy(learner.space, learner.spec)
    policy.load(learner.weights())
    x = np.random.default_rng(0).integers(0, 256, (45, *shape), dtype=np.uint8)  # > one block
    logits, values = learner.nets.actor(x).numpy(), learner.nets.v_target(x).numpy()[:, 0]
    assert np.abs(logits).max() > 1e-3 and np.abs(values).max() > 1e-2  # not a vacuous match
    np.testing.assert_allclose(policy.forward(x), logits, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(policy.value(x), values, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("torso", ["nature", "impala", "small"])
def test_bfloat16_cnn_computes_in_bfloat16_keeps_float32_state_and_trains(torso):
    from distributed_ac.bench.phases import synthetic_batch

    space = image_space((36, 36, 2))
    learner = Learner(Config(torso=torso, topology="shared", cnn_precision="bfloat16",
                             envs_per_worker=4, rollout_length=8), space)
    trunk = learner.nets.parts["actor.encoder"]
    assert trunk.convs[0].compute_dtype == "bfloat16"
    assert learner.nets.parts["actor.head"].compute_dtype == "float32"  # heads, hence losses
    assert all(v.dtype == tf.float32 for v in learner.nets.actor_variables
               + learner.nets.critic_variables)
    # the workers' float32 NumPy CNN on the same weights agrees to bfloat16's rounding
    policy = Policy(space, learner.spec)
    policy.load(learner.weights())
    x = np.random.default_rng(1).integers(0, 256, (16, 36, 36, 2), dtype=np.uint8)
    logits = learner.nets.actor(x).numpy()
    assert logits.dtype == np.float32
    err = np.abs(logits - policy.forward(x)).max() / np.abs(policy.forward(x)).max()
    assert 0 < err < 0.05, err  # not float32 (err 0) and not broken
    before = [v.numpy().copy() for v in learner.nets.actor_variables]
    metrics = learner.step(synthetic_batch(space, 8, 4))
    assert metrics["applied"] and np.isfinite(list(metrics.values())).all()
    after = [v.numpy() for v in learner.nets.actor_variables]
    assert any(not np.array_equal(b, a) for b, a in zip(before, after))


@pytest.mark.parametrize("size", [7, 8, 9, 21, 84])
def test_numpy_max_pool_equals_tensorflow_same_padding(size):
    x = np.random.default_rng(size).normal(size=(2, size, size + 1, 3)).astype(np.float32)
    ref = tf.nn.max_pool2d(x, 3, 2, "SAME").numpy()
    np.testing.assert_array_equal(max_pool_3x3_s2_same(x), ref)


@pytest.mark.parametrize("torso", ["nature", "impala"])
def test_shared_cnn_trunk_is_the_same_variables_in_actor_and_critic(torso):
    nets = Learner(Config(torso=torso, topology="shared"), image_space((36, 36, 1))).nets
    trunk = nets.parts["actor.encoder"]
    assert nets.parts["critic.encoder"] is trunk
    trunk_ids = {id(v) for v in trunk.trainable_variables}
    assert len(trunk_ids) >= 8  # every conv and the dense layer, not a subset
    assert trunk_ids <= {id(v) for v in nets.actor.trainable_variables}
    assert trunk_ids <= {id(v) for v in nets.critic.trainable_variables}
    assert trunk_ids <= {id(v) for v in nets.actor_variables}  # the actor optimizer's
    assert not trunk_ids & {id(v) for v in nets.critic_variables}
    assert not trunk_ids & {id(v) for v in nets.v_target.variables}  # V_target: its own copy


@pytest.mark.parametrize("topology", ["separate", "shared"])
@pytest.mark.parametrize("torso", ["nature", "impala", "small"])
def test_a_checkpoint_holds_every_variable_of_the_cnns(torso, topology, tmp_path):
    from distributed_ac.learning.networks import checkpoint_objects

    nets = Learner(Config(torso=torso, topology=topology), image_space((36, 36, 1))).nets
    path = tf.train.Checkpoint(**checkpoint_objects(nets)).save(str(tmp_path / "ckpt"))
    saved = [n for n in tf.train.load_checkpoint(path).get_variable_to_shape_map()
             if n.endswith("VARIABLE_VALUE") and not n.startswith(("save_counter", "model_layout"))]
    models = (nets.actor, nets.critic, nets.v_target)
    assert len(saved) == len({id(v) for m in models for v in m.variables})


def test_separate_cnns_share_no_variable():
    nets = Learner(Config(topology="separate"), image_space((36, 36, 1))).nets
    actor, critic = ({id(v) for v in m.trainable_variables} for m in (nets.actor, nets.critic))
    assert actor and critic and not actor & critic


def test_uint8_observations_reach_the_learner_as_uint8():
    cfg = Config(env=PIXELS, envs_per_worker=3, rollout_length=4, mode="sync", total_env_steps=100)
    space = probe_space(PIXELS)
    assert space.obs_shape == (36, 36, 1) and space.obs_dtype == "uint8" and space.image
    learner = Learner(cfg, space)
    workers = [RolloutWorker(cfg, i, limit_cpus=False) for i in range(2)]
    batches = [pickle.loads(pickle.dumps(w.collect(learner.weights()))) for w in workers]
    batch = Batch.concat(batches)  # what crosses the object store and what the learner joins
    assert batch.obs.dtype == np.uint8 and batch.obs.shape == (4, 6, 36, 36, 1)
    assert batch.obs.max() == 255  # the agent is drawn: real frames, not zeros
    received, step_fn = spy_on_step_inputs(learner)
    assert learner.step(batch)["applied"]
    assert received[0].dtype == np.uint8
    assert step_fn(False).structured_input_signature[0][0].dtype == tf.uint8


@pytest.mark.parametrize("kw, message", [
    (dict(normalize_obs=True), "normalize_obs is for vector observations"),
    (dict(torso="mlp"), "torso mlp takes vector observations"),
])
def test_refused_image_settings_say_why_in_one_line(kw, message, capsys):
    flags = [f"--{k.replace('_', '-')}={v}" for k, v in kw.items()]
    code = cli.main(["train", "--env", PIXELS, "--no-preset", "--serial", *flags])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and message in err, err


def test_a_cnn_on_vectors_and_a_nature_cnn_on_small_images_are_refused():
    for torso in ("nature", "small", "impala"):
        with pytest.raises(ConfigError, match="takes image"):
            encoder_for(Config(torso=torso), (4,))
    with pytest.raises(ConfigError, match=r"at least 36x36.*use --torso small or impala"):
        encoder_for(Config(torso="nature"), (16, 16, 2))
    with pytest.raises(ConfigError, match="use --torso small or impala"):
        encoder_for(Config(torso="mlp"), (10, 10, 4))
    assert encoder_for(Config(torso="impala"), (16, 16, 2)) == "impala"
    assert encoder_for(Config(), (4,)) == "mlp"


@pytest.mark.parametrize("shape, torso", [((84, 84, 4), "nature"), ((36, 36, 1), "nature"),
                                          ((36, 35, 1), "small"), ((10, 10, 4), "small"),
                                          ((7, 7, 3), "small"), ((3, 3, 1), "small")])
def test_torso_auto_picks_nature_from_36x36_and_small_below(shape, torso):
    assert encoder_for(Config(torso="auto"), shape) == torso


def test_a_small_cnn_on_images_under_3x3_is_refused_in_one_line():
    for torso in ("small", "auto"):
        with pytest.raises(ConfigError, match=r"at least 3x3.*use --torso impala\)$") as err:
            encoder_for(Config(torso=torso), (2, 2, 1))
        assert len(str(err.value).splitlines()) == 1
    assert encoder_for(Config(torso="small"), (3, 8, 1)) == "small"
    assert encoder_for(Config(torso="impala"), (2, 2, 1)) == "impala"


# ---- a CNN run's checkpoint: resume bit for bit, evaluate, export ------------------------
BATCH = 4 * 8
# Set decay periods, not auto (0): an auto schedule spans the run's budget, so a session
# given a budget of K updates decays faster than a run of K + M, and their weights part
# from the second update on, whatever the torso (README, Resume).
BASE = dict(env=PIXELS, serial=True, num_workers=1, mode="sync", seed=3, envs_per_worker=4,
            rollout_length=8, checkpoint_every=2, target_sync_every=1, log_every_s=0.001,
            actor_lr_decay_steps=3, critic_lr_decay_steps=5)
K, M = 3, 2


# run(run_dir, updates, resume=False, progress=None, **fields): BASE for `updates` batches
run = partial(train_updates, BASE)


class InterruptAt(ConsoleProgress):
    """Quiet progress that sends this process SIGINT, as Ctrl-C would, once the run has
    trained on `env_steps` steps: the loop then ends after that update, with a checkpoint."""

    def __init__(self, env_steps: int):
        super().__init__(env_steps, 1.0, stream=io.StringIO())
        self.at, self.sent = env_steps, False

    def update(self, env_steps, sps, mean_return, force=False):
        if env_steps == self.at and not self.sent:
            self.sent = True
            os.kill(os.getpid(), signal.SIGINT)
        super().update(env_steps, sps, mean_return, force)


@pytest.fixture(scope="module")
def cnn_runs(tmp_path_factory):
    return once_and_resumed(run, tmp_path_factory.mktemp("cnn"), K, M)


def test_a_cnn_run_resumes_from_its_checkpoint_and_trains_on(cnn_runs):
    _, once, first, resumed = cnn_runs
    assert once["torso"] == resumed["torso"] == "nature"
    assert first["updates"] == K and resumed["updates"] == K + M
    assert resumed["env_steps"] == (K + M) * BATCH
    a, b, k = (checkpoint_tensors(s) for s in (once, resumed, first))
    convs = [n for n in a if n.startswith("v_target") and "conv" in n]
    assert len(convs) == 6 and a.keys() == b.keys() == k.keys()
    assert all(not np.array_equal(k[n], b[n]) for n in convs)  # training went on after it


def test_a_cnn_run_resumes_bit_for_bit(cnn_runs):
    _, once, _, resumed = cnn_runs
    a, b = checkpoint_tensors(once), checkpoint_tensors(resumed)
    assert any("optimizer/_variables" in n for n in a)  # Adam's slots are compared too
    for name in a:
        assert np.array_equal(a[name], b[name]), name


def test_an_impala_run_stopped_by_a_signal_resumes_bit_for_bit_on_auto_schedules(tmp_path):
    """The default (auto) schedules span the budget: a run stopped at K by Ctrl-C and
    resumed with its budget unchanged equals the run in one go, every variable of the
    residual torso, V_target's copy and both optimizers' slots included."""
    auto = dict(torso="impala", actor_lr_decay_steps=0, critic_lr_decay_steps=0)
    once = run(tmp_path / "once", K + M, **auto)
    stopped = run(tmp_path / "split", K + M, progress=InterruptAt(K * BATCH), **auto)
    assert stopped["stopped_by"] == "SIGINT" and stopped["updates"] == K
    resumed = run(tmp_path / "split", K + M, resume=True, **auto)
    assert resumed["torso"] == "impala" and resumed["updates"] == K + M
    a, b, k = (checkpoint_tensors(s) for s in (once, resumed, stopped))
    convs = [n for n in a if n.startswith("v_target") and "res" in n]
    assert len(convs) == 24 and a.keys() == b.keys()  # 6 residual blocks x 2 convs x 2
    for name in a:
        assert np.array_equal(a[name], b[name]), name
    assert all(not np.array_equal(k[n], b[n]) for n in convs)  # training went on after K


def test_evaluate_and_export_load_the_trained_cnns(cnn_runs):
    from distributed_ac.trained.load import load_trained

    _, space, learner, _ = load_trained(cnn_runs[0] / "once")
    trained, fresh = learner.weights(), Learner(Config(**BASE), space).weights()
    assert learner.spec.encoder == "nature"
    # target_sync_every=1: V_target was synced to V by the last update, convs included
    critic = [v.numpy() for v in learner.nets.path("critic")]
    target = trained.parts["v_target.encoder"] + trained.parts["v_target.head"]
    assert len(critic) == len(target) == bundle_size("nature") + 2
    for t, v in zip(target, critic):
        np.testing.assert_array_equal(t, v)
    actor, fresh_actor = (w.parts["actor.encoder"] + w.parts["actor.head"] for w in (trained, fresh))
    assert all(not np.array_equal(a, b) for a, b in zip(actor, fresh_actor))


def test_evaluate_runs_a_pixel_policy(cnn_runs):
    from distributed_ac.trained.evaluate import evaluate

    report = evaluate(cnn_runs[0] / "once", episodes=3)
    assert report["episodes"] == 3 and all(0.0 <= r <= 1.0 for r in report["returns"])


def test_export_takes_uint8_images_and_matches_the_numpy_policy(cnn_runs, tmp_path):
    from distributed_ac.trained.savedmodel import export

    run_dir = cnn_runs[0] / "once"
    info = export(run_dir, tmp_path / "model")
    assert info["obs_shape"] == [36, 36, 1] and info["obs_dtype"] == "uint8"
    model = tf.saved_model.load(str(tmp_path / "model"))
    policy, _, _ = policy_of(run_dir)
    x = np.random.default_rng(1).integers(0, 256, (40, 36, 36, 1), dtype=np.uint8)
    _, want, _ = policy.act(x, np.random.default_rng(0), deterministic=True)
    np.testing.assert_array_equal(model.action(tf.constant(x)).numpy(), want)
    # target_sync_every=1: V_target (the policy's) is V (the export's) after every update
    np.testing.assert_allclose(model.value(tf.constant(x)).numpy(), policy.value(x),
                               rtol=1e-5, atol=1e-5)
    serving = model.signatures["serving_default"]
    assert serving.structured_input_signature[1]["obs"].dtype == tf.uint8
    with pytest.raises((TypeError, ValueError)):
        model.action(tf.constant(x.astype(np.float32)))  # bytes in, as the env gives them
