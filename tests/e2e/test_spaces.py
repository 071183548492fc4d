"""Action spaces beyond Discrete and Box: MultiDiscrete (and MultiBinary, as a
MultiDiscrete of 2s) on the workers' NumPy head, in the learner's log-probabilities and
entropies, in a worker's batches and in a real training run."""

import gymnasium as gym
import numpy as np
import pytest
from fakes import SpaceSample
from helpers import train_quietly

from distributed_ac.acting.worker import RolloutWorker
from distributed_ac.config.schema import Config
from distributed_ac.core.errors import EnvError
from distributed_ac.envs.space import space_of
from distributed_ac.envs.vector import make_vector_env
from distributed_ac.models.heads import MultiCategoricalHead

MULTI = "distributed_ac.envs.choices:MultiChoice"
BINARY = "distributed_ac.envs.choices:MultiBinaryChoice"
NVEC = (3, 4, 5)


def explicit_log_softmax(z: np.ndarray) -> np.ndarray:
    """log(exp(z_k) / sum_j exp(z_j)) for one row, in float64, term by term."""
    total = sum(np.exp(float(v)) for v in z)
    return np.array([float(v) - np.log(total) for v in z])


def reference_terms(logits: np.ndarray, actions: np.ndarray, nvec) -> tuple[np.ndarray, ...]:
    """Per row: sum over components of log p_i(a_i), and of -sum_k p_ik log p_ik."""
    logp, entropy = [], []
    for row, chosen in zip(logits, actions):
        lp = ent = 0.0
        start = 0
        for n, a in zip(nvec, chosen):
            ls = explicit_log_softmax(row[start:start + n])
            lp += ls[a]
            ent -= sum(np.exp(x) * x for x in ls)
            start += n
        logp.append(lp)
        entropy.append(ent)
    return np.array(logp), np.array(entropy)


def test_multi_discrete_log_prob_and_entropy_are_the_sums_over_components():
    import tensorflow as tf

    from distributed_ac.learning import distributions

    rng = np.random.default_rng(0)
    logits = (3 * rng.standard_normal((32, sum(NVEC)))).astype(np.float32)
    actions = np.stack([rng.integers(0, n, 32) for n in NVEC], axis=1).astype(np.int32)
    want_logp, want_ent = reference_terms(logits, actions, NVEC)
    got_logp = distributions.multi_categorical_log_prob(tf.constant(logits), actions, NVEC)
    got_ent = distributions.multi_categorical_entropy(tf.constant(logits), NVEC)
    np.testing.assert_allclose(got_logp.numpy(), want_logp, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(got_ent.numpy(), want_ent, rtol=1e-5, atol=1e-5)


def test_the_numpy_head_samples_each_component_from_its_own_softmax():
    head = MultiCategoricalHead(NVEC, (0, 10, -2))
    rng = np.random.default_rng(1)
    row = rng.standard_normal(sum(NVEC)).astype(np.float32)
    logits = np.repeat(row[None], 40_000, axis=0)
    stored, logp = head.sample(logits, rng, deterministic=False)
    assert stored.shape == (40_000, 3) and stored.dtype == np.int32
    want_logp, _ = reference_terms(logits[:64], stored[:64], NVEC)
    np.testing.assert_allclose(logp[:64], want_logp, rtol=1e-5, atol=1e-5)
    start = 0
    for i, n in enumerate(NVEC):
        p = np.exp(explicit_log_softmax(row[start:start + n]))
        freq = np.bincount(stored[:, i], minlength=n) / len(stored)
        np.testing.assert_allclose(freq, p, atol=0.01)  # ~4 standard errors at 40k draws
        start += n
    greedy, _ = head.sample(logits[:1], rng, deterministic=True)
    np.testing.assert_array_equal(greedy[0], [np.argmax(row[:3]), np.argmax(row[3:7]),
                                              np.argmax(row[7:])])
    # each component's own offset (MultiDiscrete's start) reaches the env
    np.testing.assert_array_equal(head.env_action(greedy)[0], greedy[0] + [0, 10, -2])


def test_spaces_of_multi_discrete_and_multi_binary_envs():
    space = space_of(make_vector_env(MULTI, 1), MULTI)
    assert space.discrete and space.multi_discrete and space.action_nvec == NVEC
    assert space.num_actions == 12 and space.action_shape == (3,)
    binary = space_of(make_vector_env(BINARY, 1), BINARY)
    assert binary.action_nvec == (2, 2, 2, 2) and binary.action_starts == (0, 0, 0, 0)


@pytest.mark.parametrize("space", [gym.spaces.MultiDiscrete([[2, 3], [4, 5]]),
                                   gym.spaces.MultiBinary([2, 2])])
def test_multi_dimensional_multi_discrete_is_refused_in_one_line(space):
    class Env(gym.Env):
        observation_space = gym.spaces.Box(-1, 1, (2,), np.float32)
        action_space = space

    venv = gym.vector.SyncVectorEnv([Env])
    with pytest.raises(EnvError, match="only 1-D Multi"):
        space_of(venv, "two-d")


def test_a_workers_batch_stores_every_component_of_every_action():
    cfg = Config(env=MULTI, num_envs=4, rollout_length=16, hidden_sizes=(8,), seed=3)
    worker = RolloutWorker(cfg, limit_cpus=False)
    from distributed_ac.learning.learner import Learner

    batch = worker.collect(Learner(cfg, worker.space).weights())
    assert batch.actions.shape == (16, 4, 3) and batch.actions.dtype == np.int32
    assert (batch.actions >= 0).all() and (batch.actions < np.array(NVEC)).all()
    # an untrained policy is near uniform: every choice of every component occurs
    for i, n in enumerate(NVEC):
        assert set(np.unique(batch.actions[..., i])) == set(range(n))
    assert worker.empty_actions().shape == (0, 4, 3)


@pytest.mark.parametrize("env,floor", [(MULTI, 15.2), (BINARY, 15.2)])
def test_multi_discrete_and_multi_binary_tasks_are_learned_near_their_optimum(env, floor,
                                                                            tmp_path):
    """MultiChoice pays 1 a step for naming all its targets (16 an episode; uniform ~4.2,
    MultiBinary's uniform 8): the floor is 95% of the optimum."""
    cfg = Config(env=env, serial=True, num_workers=1, num_envs=16, rollout_length=16,
                 hidden_sizes=(32,), policy_loss="clip", update_epochs=4, minibatch_size=64,
                 actor_lr=3e-3, critic_lr=3e-3, total_env_steps=32_000, seed=0)
    summary = train_quietly(cfg, tmp_path / "run", every_s=5.0)
    assert summary["mean_return_100"] >= floor, summary


# ---- Dict and Tuple observations -----------------------------------------------------
DICT = "distributed_ac.envs.choices:DictChoice"


MIXED = gym.spaces.Dict({"pos": gym.spaces.Box(-1, 1, (2, 2), np.float32),
                         "room": gym.spaces.Discrete(3, start=1),
                         "keys": gym.spaces.MultiBinary(2)})


def test_vector_entries_of_a_dict_become_one_vector_in_the_spaces_order():
    from distributed_ac.envs import structured

    venv = gym.vector.SyncVectorEnv([lambda: SpaceSample(MIXED)] * 3)
    space = space_of(venv, "mixed")
    obs, _ = venv.reset(seed=0)
    got = space.as_batch(obs, 3)
    assert got.shape == (3, 9) and got.dtype == np.float32 and space.obs_shape == (9,)
    order = [e.key for e in space.obs_entries]
    for i in range(3):  # built by hand: each entry flattened or one-hot, side by side
        pieces = {"pos": obs["pos"][i].ravel(), "keys": obs["keys"][i].astype(np.float32),
                  "room": np.eye(3)[obs["room"][i] - 1]}
        np.testing.assert_array_equal(got[i], np.concatenate([pieces[k] for k in order]))
    tup = gym.spaces.Tuple((gym.spaces.Discrete(2), gym.spaces.Box(0, 1, (3,), np.float32)))
    tspace = space_of(gym.vector.SyncVectorEnv([lambda: SpaceSample(tup)] * 2), "tuple")
    tobs = (np.array([1, 0]), np.arange(6, dtype=np.float32).reshape(2, 3))
    np.testing.assert_array_equal(structured.as_vector(tobs, tspace.obs_entries, 2),
                                  [[0, 1, 0, 1, 2], [1, 0, 3, 4, 5]])


@pytest.mark.parametrize("space,message", [
    (gym.spaces.Dict({"a": gym.spaces.Dict({"b": gym.spaces.Discrete(2)}),
                      "v": gym.spaces.Box(-1, 1, (2,), np.float32)}), "entry 'a' of space Dict"),
    (gym.spaces.Dict({"img": gym.spaces.Box(0, 255, (8, 8, 3), np.uint8),
                      "s": gym.spaces.Graph(gym.spaces.Box(0, 1, (2,)), None)}),
     "entry 's' of space Graph")])
def test_unsupported_dict_observations_are_refused_in_one_line(space, message):
    venv = gym.vector.SyncVectorEnv([lambda: SpaceSample(space)])
    with pytest.raises(EnvError, match=message):
        space_of(venv, "dict")


def test_a_task_that_needs_both_entries_of_a_dict_is_learned(tmp_path):
    """DictChoice: name the target among the upper or the lower four actions, as "upper"
    says; a policy reading only "target" scores 8 of 16, only "upper" 4: 95% needs both
    entries. The exported model takes the Dict's entries by name."""
    cfg = Config(env=DICT, serial=True, num_workers=1, num_envs=16, rollout_length=16,
                 hidden_sizes=(32,), policy_loss="clip", update_epochs=4,
                 minibatch_size=64, actor_lr=3e-3, critic_lr=3e-3,
                 total_env_steps=48_000,
                 seed=0)
    summary = train_quietly(cfg, tmp_path / "run", every_s=5.0)
    assert summary["mean_return_100"] >= 15.2, summary
    from distributed_ac.commands import main as cli

    assert cli.main(["export", str(tmp_path / "run"), "--out", str(tmp_path / "m")]) == 0
    import tensorflow as tf

    model = tf.saved_model.load(str(tmp_path / "m"))
    target, upper = np.arange(8) % 4, (np.arange(8) // 4).reshape(8, 1).astype(np.float32)
    served = model.signatures["serving_default"](target=tf.constant(target, tf.int64),
                                                 upper=tf.constant(upper))["action"]
    np.testing.assert_array_equal(served.numpy(), target + 4 * upper[:, 0])
