"""Invalid-action masking: an env's Dict observation {<obs>, action_mask} (1 = allowed).
A masked action has probability exactly 0 on the workers, in the learner's log-probs and
entropy (over the allowed actions only), in evaluate and in the exported model; a real
step whose mask allows nothing is an env error naming the step; training on the mask
never takes an illegal action."""

import json
import textwrap

import numpy as np
import pytest
from batches import policy_of
from failed_runs import crash_report
from helpers import dac, python, train_quietly

from distributed_ac.acting.numpy_policy import Policy
from distributed_ac.acting.worker import RolloutWorker
from distributed_ac.config.schema import Config
from distributed_ac.core.errors import EnvStepError
from distributed_ac.envs.choices import MaskedChoice, MaskedImageMultiChoice
from distributed_ac.envs.space import space_of
from distributed_ac.envs.vector import make_vector_env
from distributed_ac.models.heads import MultiCategoricalHead
from distributed_ac.models.spec import ModelSpec

MASKED = "distributed_ac.envs.choices:MaskedChoice"


def random_masks(rng, n: int, k: int) -> np.ndarray:
    """[n, k] bool masks with at least one allowed action a row, some with exactly one."""
    legal = rng.random((n, k)) < 0.5
    legal[np.arange(n), rng.integers(0, k, n)] = True
    legal[: n // 4] = False
    legal[np.arange(n // 4), rng.integers(0, k, n // 4)] = True
    return legal


def allowed_log_softmax(z: np.ndarray, legal: np.ndarray) -> np.ndarray:
    """log p over the allowed entries of one row, explicitly; -inf where masked."""
    total = sum(np.exp(float(v)) for v, ok in zip(z, legal) if ok)
    return np.array([float(v) - np.log(total) if ok else -np.inf for v, ok in zip(z, legal)])


@pytest.fixture(scope="module")
def trained_policy():
    """A learner and the workers' NumPy policy for MaskedChoice, the same weights."""
    from distributed_ac.learning.learner import Learner

    cfg = Config(env=MASKED, hidden_sizes=(16,))
    space = space_of(make_vector_env(MASKED, 1), MASKED)
    learner = Learner(cfg, space)
    policy = Policy(space, ModelSpec.of(cfg, space))
    policy.load(learner.weights())
    return cfg, space, learner, policy


def test_the_space_splits_the_mask_from_the_observation():
    space = space_of(make_vector_env(MASKED, 1), MASKED)
    assert (space.obs_key, space.mask_size, space.obs_shape) == ("obs", 6, (6,))
    ignored = space_of(make_vector_env(MASKED, 1), MASKED, use_mask=False)
    assert (ignored.obs_key, ignored.mask_size) == ("obs", 0)


def test_the_networks_read_the_mask_only_when_asked():
    venv = make_vector_env(MASKED, 2)
    obs, _ = venv.reset(seed=0)
    space = space_of(venv, MASKED, observe_mask=True)
    assert space.mask_size == 6 and space.obs_shape == (12,)  # still applied, and read
    x = space.as_batch(obs, 2)
    keys = [e.key for e in space.obs_entries]
    mask_at = 6 * keys.index("action_mask")
    np.testing.assert_array_equal(x[:, mask_at:mask_at + 6], obs["action_mask"])
    assert space_of(venv, MASKED).obs_shape == (6,)


def test_workers_never_sample_a_masked_action(trained_policy):
    _, _, _, policy = trained_policy
    rng = np.random.default_rng(0)
    obs = rng.random((4000, 6)).astype(np.float32)
    legal = random_masks(rng, 4000, 6)
    for _ in range(5):
        stored, _, logp = policy.act(obs, rng, legal=legal)
        assert legal[np.arange(4000), stored].all()
    greedy, _, _ = policy.act(obs, rng, deterministic=True, legal=legal)
    assert legal[np.arange(4000), greedy].all()
    logits = policy.forward(obs)
    for i in range(0, 4000, 397):
        np.testing.assert_allclose(logp[i], allowed_log_softmax(logits[i], legal[i])[stored[i]],
                                   rtol=1e-5, atol=1e-5)


def test_a_multi_discrete_mask_masks_each_components_slice():
    head = MultiCategoricalHead((3, 4), (0, 0))
    rng = np.random.default_rng(1)
    logits = rng.standard_normal((5000, 7)).astype(np.float32)
    legal = np.concatenate([random_masks(rng, 5000, 3), random_masks(rng, 5000, 4)], axis=1)
    stored, _ = head.sample(np.where(legal, logits, -1e9).astype(np.float32), rng, False)
    assert legal[np.arange(5000), stored[:, 0]].all()
    assert legal[np.arange(5000), 3 + stored[:, 1]].all()


def test_the_learners_log_probs_and_entropy_run_over_allowed_actions_only(trained_policy):
    import tensorflow as tf

    _, _, learner, _ = trained_policy
    rng = np.random.default_rng(2)
    logits = (2 * rng.standard_normal((64, 6))).astype(np.float32)
    legal = random_masks(rng, 64, 6)
    actions = np.array([rng.choice(np.flatnonzero(row)) for row in legal], np.int32)
    logp, ent = learner.objective.policy_terms(tf.constant(logits), actions, [64],
                                               tf.constant(legal))
    ref = np.array([allowed_log_softmax(z, ok) for z, ok in zip(logits, legal)])
    np.testing.assert_allclose(logp.numpy(), ref[np.arange(64), actions], rtol=1e-5, atol=1e-5)
    p = np.exp(ref)
    want_ent = -np.array([sum(pi * li for pi, li in zip(pr, lr) if pi > 0)
                          for pr, lr in zip(p, ref)])
    np.testing.assert_allclose(ent.numpy(), want_ent, rtol=1e-5, atol=1e-5)
    # a masked action's probability is exactly 0
    masked = np.array([np.flatnonzero(~row)[0] if (~row).any() else 0 for row in legal], np.int32)
    has_masked = (~legal).any(axis=1)
    lp_masked, _ = learner.objective.policy_terms(tf.constant(logits), masked, [64],
                                                  tf.constant(legal))
    assert (np.exp(lp_masked.numpy())[has_masked] == 0.0).all()


def test_a_batch_keeps_the_masks_its_actions_were_sampled_under(trained_policy):
    cfg = Config(env=MASKED, num_envs=4, rollout_length=40, hidden_sizes=(16,), seed=1)
    worker = RolloutWorker(cfg, limit_cpus=False)
    batch = worker.collect(trained_policy[2].weights())
    assert batch.action_mask.shape == (40, 4, 6) and batch.action_mask.dtype == bool
    real = batch.mask > 0
    chosen = np.take_along_axis(batch.action_mask, batch.actions[..., None], axis=-1)[..., 0]
    assert chosen[real].all()
    assert (batch.action_mask.sum(-1)[real] == 4).all()  # MaskedChoice allows 4 of 6
    assert batch.action_mask[~real].all() and (~real).any()  # reset steps: all allowed


def test_a_step_that_allows_nothing_is_an_env_error_naming_the_step():
    cfg = Config(env="fakes:MaskedStuck", num_envs=2, rollout_length=8, hidden_sizes=(8,))
    worker = RolloutWorker(cfg, limit_cpus=False)
    from distributed_ac.learning.learner import Learner

    with pytest.raises(EnvStepError, match=r"allowed no action in worker 0, sub-env 0, step 2 "):
        worker.collect(Learner(cfg, worker.space).weights())


SERVE = textwrap.dedent("""
    import sys
    import numpy as np
    import tensorflow as tf
    model = tf.saved_model.load(sys.argv[1])
    data = np.load(sys.argv[2])
    sig = model.signatures["serving_default"]
    np.savez(sys.argv[3], action=model.action(data["obs"], data["mask"]).numpy(),
             served=sig(obs=tf.constant(data["obs"]), action_mask=tf.constant(data["mask"]))["action"].numpy())
""")


@pytest.fixture(scope="module")
def masked_run(tmp_path_factory):
    """MaskedChoice trained with its mask (clipped surrogate), and with it ignored."""
    runs = {}
    for ignore in (False, True):
        cfg = Config(env=MASKED, serial=True, num_workers=1, num_envs=16, rollout_length=16,
                     hidden_sizes=(32,), policy_loss="clip", update_epochs=4, minibatch_size=64,
                     actor_lr=3e-3,
                     critic_lr=3e-3, total_env_steps=16_000, seed=0, ignore_action_mask=ignore)
        path = tmp_path_factory.mktemp("masked") / "run"
        summary = train_quietly(cfg, path, every_s=5.0)
        runs[ignore] = (path, summary)
    return runs


def illegal_rate(run_dir, episodes: int = 30) -> tuple[float, float]:
    """(illegal actions a step, mean return) of the run's policy sampling on MaskedChoice,
    with the mask applied exactly as the run applied it."""
    policy, space, _ = policy_of(run_dir)
    env, rng, total, steps = MaskedChoice(), np.random.default_rng(0), 0.0, 0
    for i in range(episodes):
        obs, _ = env.reset(seed=i)
        done = False
        while not done:
            _, action, _ = policy.act(space.as_batch(obs, 1), rng,
                                      legal=space.action_masks(obs, 1))
            obs, r, term, trunc, _ = env.step(action[0])
            total, steps, done = total + r, steps + 1, term or trunc
    return env.illegal_taken / steps, total / episodes


def test_training_with_the_mask_never_takes_an_illegal_action_and_nears_the_optimum(masked_run):
    """The optimum is 16 (the target every step); illegal actions pay 3 and lure a policy
    that ignores the mask."""
    path, summary = masked_run[False]
    assert summary["mean_return_100"] >= 15.2, summary  # 95% of the optimum
    rate, _ = illegal_rate(path)
    assert rate == 0.0
    ignored_path, _ = masked_run[True]
    ignored_rate, _ = illegal_rate(ignored_path)
    assert ignored_rate > 0.05  # without the mask the same run does take them


def test_the_exported_model_takes_the_mask_and_never_chooses_a_masked_action(masked_run,
                                                                            tmp_path, capsys):
    from distributed_ac.commands import main as cli

    path, _ = masked_run[False]
    assert cli.main(["export", str(path), "--out", str(tmp_path / "m")]) == 0
    capsys.readouterr()
    rng = np.random.default_rng(3)
    obs = np.eye(6, dtype=np.float32)[rng.integers(0, 6, 500)]
    legal = random_masks(rng, 500, 6)
    np.savez(tmp_path / "in.npz", obs=obs, mask=legal.astype(np.float32))
    out = python("-c", SERVE, str(tmp_path / "m"), str(tmp_path / "in.npz"),
                 str(tmp_path / "out.npz"), timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    got = np.load(tmp_path / "out.npz")
    assert legal[np.arange(500), got["action"]].all()
    np.testing.assert_array_equal(got["served"], got["action"])
    policy, _, _ = policy_of(path)
    _, want, _ = policy.act(obs, rng, deterministic=True, legal=legal)
    np.testing.assert_array_equal(got["action"], want)
    # the masks here are random, not MaskedChoice's (which always allow the target), so
    # they often mask the argmax: unmasked, the trained argmax is the target
    _, free, _ = policy.act(obs, rng, deterministic=True)
    assert (free == obs.argmax(1)).mean() > 0.9


def test_a_recurrent_masked_policy_trains_with_sequence_minibatches(tmp_path):
    cfg = Config(env=MASKED, serial=True, num_workers=1, num_envs=8, rollout_length=8,
                 hidden_sizes=(16,), core="gru", core_size=16, update_epochs=2,
                 minibatch_size=32, total_env_steps=8 * 8 * 6, seed=0)
    summary = train_quietly(cfg, tmp_path / "run", every_s=5.0)
    assert summary["updates"] == 6 and summary["skipped_updates"] == 0


MASKED_MULTI = "distributed_ac.envs.choices:MaskedImageMultiChoice"


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_mask_multi_discrete_a_mixed_dict_and_a_core_compose_on_local_ray(
        mode, tmp_path, capsys):
    """A GRU policy over a Dict of an image and a vector, with a mask, over MultiDiscrete
    actions, trained by `dac train` on an embedded local Ray (2 workers, pinned), then
    `dac evaluate` and `dac export`: the exported model takes the Dict and the mask, and,
    stepped with its state, never chooses a masked component."""
    import tensorflow as tf

    from distributed_ac.commands import main as cli

    run_dir = tmp_path / "run"
    out = dac("train", "--env", MASKED_MULTI, "--mode", mode, "--num-workers", "2",
              "--num-envs", "8", "--rollout-length", "8", "--core", "gru", "--core-size", "16",
              "--hidden-sizes", "16", "--policy-loss", "clip", "--update-epochs", "2",
              "--minibatch-size", "32", "--total-env-steps", str(8 * 8 * 6),
              "--run-dir", str(run_dir), timeout=600)
    assert out.returncode == 0, crash_report(out)
    summary = json.loads(out.stdout.strip().splitlines()[-1])
    assert summary["updates"] >= 5 and summary["core"] == "gru" and summary["workers"] == 2
    assert cli.main(["evaluate", str(run_dir), "--episodes", "3"]) == 0
    assert cli.main(["export", str(run_dir), "--out", str(tmp_path / "m")]) == 0
    capsys.readouterr()
    model = tf.saved_model.load(str(tmp_path / "m"))
    env = MaskedImageMultiChoice()
    obs, _ = env.reset(seed=0)
    state = model.initial_state(tf.constant(1))
    for _ in range(40):
        mask = obs["action_mask"][None].astype(np.float32)
        action, state = model.action({"image": obs["image"][None], "obs": obs["obs"][None]},
                                     mask, state)
        assert action.shape == (1, 3)
        obs, _, term, trunc, _ = env.step(action.numpy()[0])
        if term or trunc:
            obs, _ = env.reset()
            state = model.initial_state(tf.constant(1))
    assert env.illegal_taken == 0
