"""Recurrent cores end to end: the workers' NumPy steps and the learner's unroll agree on
a real batch (from the state the batch stored, with episodes starting mid-rollout), the
stored state matters, the clipped surrogate's minibatches are whole sequences, a memory
task is solved only with a core, and evaluate and export carry the state."""

import numpy as np
import pytest
import tensorflow as tf
from batches import CUE, policy_of, small_recurrent, third_batch
from helpers import train_quietly

from distributed_ac.config.schema import Config
from distributed_ac.learning import clipped
from distributed_ac.learning.networks import Sequence


def unroll(nets, network: str, obs, state, starts):
    """An independent unroll: encoder, then the core step by step, then the head."""
    parts = nets.parts
    T, N = starts.shape
    x = parts[f"{network}.encoder"](tf.reshape(obs, [T * N, *obs.shape[2:]]))
    x = tf.reshape(x, [T, N, -1])
    out, _ = parts[f"{network}.core"](x, tuple(tf.constant(s) for s in state), starts)
    return parts[f"{network}.head"](tf.reshape(out, [T * N, -1]))


@pytest.mark.parametrize("core,topology,pixels,envs", [("lstm", "separate", False, 6),
                                                       ("gru", "shared", False, 6),
                                                       ("lstm", "shared", True, 6),
                                                       # values in more than one block
                                                       ("gru", "separate", False, 72)])
def test_the_learner_unroll_reproduces_the_workers_log_probs_and_values(core, topology, pixels,
                                                                        envs):
    image = dict(env="fakes:PixelChase", torso="nature") if pixels else {}
    learner, b = third_batch(small_recurrent(core=core, topology=topology, num_envs=envs, **image))
    T, N = b.rewards.shape
    assert b.starts[1:].any() and not b.starts[0].all()  # episodes begin mid-rollout
    assert np.abs(b.core_state["actor.core"][0]).max() > 0.01  # a state carried in
    actions = tf.reshape(tf.constant(b.actions), [-1])

    def logp(actor_state):
        seq = Sequence(tf.constant([T, N]), tuple(tf.constant(s) for s in actor_state),
                       (), tf.constant(b.starts))
        out = learner.nets.actor_output(tf.reshape(b.obs, [T * N, *b.obs.shape[2:]]), seq)
        return learner.objective.policy_terms(out, actions, [T, N])[0].numpy()

    np.testing.assert_allclose(logp(b.core_state["actor.core"]), b.behaviour_logp, atol=1e-5)
    values = unroll(learner.nets, "v_target", b.obs, b.core_state["v_target.core"], b.starts)
    np.testing.assert_allclose(values.numpy().reshape(T, N), b.values[:T], atol=1e-5)
    # the stored state is what makes them agree: from zeros, the steps before each
    # sub-env's first episode start score differently
    wrong = logp([np.zeros_like(s) for s in b.core_state["actor.core"]])
    before_start = np.cumsum(b.starts, axis=0) == 0
    assert not np.allclose(wrong[before_start], b.behaviour_logp[before_start], atol=1e-4)
    np.testing.assert_allclose(wrong[~before_start], b.behaviour_logp[~before_start], atol=1e-5)


def test_a_wrong_stored_state_changes_the_learners_loss():
    cfg = small_recurrent(policy_loss="pg")
    learner, b = third_batch(cfg)
    metrics, *_ = learner._run_step(b)
    zeroed = {k: [np.zeros_like(a) for a in v] for k, v in b.core_state.items()}
    learner2, _ = third_batch(cfg)  # the same weights (same seed), not yet stepped
    wrong, *_ = learner2._run_step(type(b)(**{**b.__dict__, "core_state": zeroed}))
    assert metrics["actor_loss"] != pytest.approx(wrong["actor_loss"], abs=1e-6)


def test_clipped_minibatches_are_whole_sub_env_sequences():
    T, n, epochs = 5, 12, 3
    seen = []

    def step(adv, starts, actor_state, **_):
        seen.append((adv.numpy(), actor_state[0].numpy()))
        return tf.zeros(len(clipped.METRICS)), tf.constant(True)

    column = np.tile(np.arange(n, dtype=np.float32), (T, 1))  # each sub-env's own id
    columns = {"adv": tf.constant(column), "starts": tf.zeros([T, n])}
    states = {"actor_state": (tf.constant(np.arange(n, dtype=np.float32)[:, None]),)}
    # 60 samples in minibatches of ~20: 3 a pass, 4 sub-envs each
    clipped.clipped_update_sequences(step, columns, states, epochs, 20,
                                     tf.random.Generator.from_seed(0))
    assert len(seen) == 3 * epochs
    for adv, state in seen:
        assert adv.shape == (T, 4)  # every step of each chosen sub-env
        assert (adv == adv[0]).all()  # a column is one sub-env, never shuffled steps
        np.testing.assert_array_equal(state[:, 0], adv[0])  # with that sub-env's state
    for e in range(epochs):  # each pass covers every sub-env once
        ids = np.concatenate([adv[0] for adv, _ in seen[3 * e:3 * e + 3]])
        assert sorted(ids.tolist()) == list(range(n))


def memory_run(tmp_path, core: str) -> dict:
    cfg = Config(env=CUE, serial=True, num_workers=1, num_envs=16, rollout_length=16, seed=0,
                 core=core, core_size=32, hidden_sizes=(32,), policy_loss="pg",
                 entropy_coef=0.01, actor_lr=3e-3, critic_lr=3e-3, total_env_steps=24_000,
                 log_every_s=0.001)
    return train_quietly(cfg, tmp_path / core)


def test_a_memory_task_is_solved_with_a_core_and_not_without(tmp_path):
    """CueMemory: +1 for naming a cue seen 4 steps earlier, -1 otherwise; without memory
    the best expected return is 0."""
    assert memory_run(tmp_path, "gru")["mean_return_100"] >= 0.9
    assert memory_run(tmp_path, "none")["mean_return_100"] <= 0.4


@pytest.fixture(scope="module")
def recurrent_run(tmp_path_factory):
    cfg = small_recurrent(serial=True, num_workers=1, total_env_steps=4 * 6 * 16,
                          log_every_s=0.001, topology="separate")
    run_dir = tmp_path_factory.mktemp("recurrent") / "run"
    train_quietly(cfg, run_dir)
    return run_dir


def test_the_exported_model_carries_the_state_in_a_loop(recurrent_run, tmp_path):
    """SavedModel: action(obs, state) -> (action, state), stepped through an episode,
    equals the workers' policy stepping its own state; value keeps the critic's."""
    from distributed_ac.trained.savedmodel import export

    export(recurrent_run, tmp_path / "model")
    m = tf.saved_model.load(str(tmp_path / "model"))
    policy, _, _ = policy_of(recurrent_run)
    policy.reset_state(1)
    import gymnasium as gym

    env = gym.make("CartPole-v1")
    obs, _ = env.reset(seed=0)
    state, value_state = m.initial_state(tf.constant(1)), m.initial_state(tf.constant(1))
    assert state.shape == (1, 16)  # the LSTM's h and c, 8 units each
    served = m.signatures["serving_default"]
    for t in range(30):
        x = obs[None].astype(np.float32)
        action, new_state = m.action(tf.constant(x), state)
        named = served(obs=tf.constant(x), state=state)
        np.testing.assert_array_equal(named["action"].numpy(), action.numpy())
        _, expected, _ = policy.act(x, None, deterministic=True, starts=np.array([t == 0]))
        assert int(action.numpy()[0]) == int(expected[0])
        np.testing.assert_allclose(new_state.numpy(), np.concatenate(
            policy.state["actor.core"], axis=-1), atol=1e-5)
        _, value_state = m.value(tf.constant(x), value_state)
        state = new_state
        obs, _, terminated, truncated, _ = env.step(int(action.numpy()[0]))
        if terminated or truncated:
            break
    assert np.abs(state.numpy()).max() > 0.01 and np.abs(value_state.numpy()).max() > 0.01


def test_evaluate_starts_each_episode_from_a_zero_state(recurrent_run):
    """Episodes on the same seeds give the same returns whatever ran before them."""
    from distributed_ac.trained.evaluate import evaluate

    both = evaluate(recurrent_run, episodes=3, deterministic=True, seed=5)["returns"]
    last = evaluate(recurrent_run, episodes=1, deterministic=True, seed=7)["returns"]
    assert both[2] == last[0]
