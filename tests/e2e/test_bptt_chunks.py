"""bptt_length: the clipped surrogate's minibatches of a recurrent model as chunks of a
rollout, each entered with the core state pi_old reached there. Checked against the
workers' own NumPy policy: before any update, every chunk scores the batch's actions
and values exactly as the workers did over the whole rollout."""

import numpy as np
import pytest
import tensorflow as tf
from batches import CUE, small_recurrent, third_batch
from helpers import train_quietly

from distributed_ac.config.plan import make_plan
from distributed_ac.config.schema import Config
from distributed_ac.core.errors import ConfigError
from distributed_ac.learning import clipped
from distributed_ac.learning.networks import Sequence


def _seq(T, N, actor_state, critic_state, starts):
    as_t = lambda s: tuple(tf.constant(x) for x in s)  # noqa: E731
    return Sequence(tf.constant([T, N]), as_t(actor_state), as_t(critic_state),
                    tf.constant(starts))


@pytest.mark.parametrize("core,topology", [("lstm", "separate"), ("gru", "shared")])
def test_chunks_entered_with_pi_olds_states_score_what_the_workers_scored(core, topology):
    cfg = small_recurrent(core=core, topology=topology, policy_loss="clip", bptt_length=4)
    learner, b = third_batch(cfg)
    T, N = b.rewards.shape
    nets = learner.nets
    flat_obs = tf.reshape(b.obs, [T * N, *b.obs.shape[2:]])
    critic_key = "actor.core" if topology == "shared" else "v_target.core"  # V_target = V now
    seq = _seq(T, N, b.core_state["actor.core"], b.core_state[critic_key], b.starts)
    actor, critic = nets.entering_states(flat_obs, seq)
    columns = dict(obs=tf.constant(b.obs), actions=tf.constant(b.actions),
                   starts=tf.constant(b.starts), logp=tf.constant(b.behaviour_logp),
                   values=tf.constant(b.values[:T]))
    cut, states = clipped.chunked(columns, dict(actor=actor, critic=critic), 4)
    L, chunks = cut["starts"].shape[0], tf.shape(cut["starts"])[1]
    assert L == 4 and int(chunks) == (T // 4) * N
    assert b.starts[1:].any() and not np.array_equal(
        np.asarray(states["actor"][0])[N:], np.zeros_like(np.asarray(states["actor"][0])[N:]))
    chunk_seq = Sequence(tf.stack([L, chunks]), states["actor"], states["critic"], cut["starts"])
    chunk_obs = tf.reshape(cut["obs"], [-1, *b.obs.shape[2:]])
    pi, v = nets.actor_and_value(chunk_obs, chunk_seq)
    logp = learner.objective.policy_terms(pi, tf.reshape(cut["actions"], [-1]), [L, chunks])[0]
    np.testing.assert_allclose(logp.numpy(), cut["logp"].numpy(), atol=1e-5)
    np.testing.assert_allclose(tf.reshape(v, [L, -1]).numpy(), cut["values"].numpy(), atol=1e-5)
    # the states matter: every chunk entered from zeros scores its first steps otherwise
    zeros = tuple(tf.zeros_like(s) for s in states["actor"])
    wrong, _ = nets.actor_and_value(chunk_obs, chunk_seq._replace(actor_state=zeros))
    wrong = learner.objective.policy_terms(wrong, tf.reshape(cut["actions"], [-1]), [L, chunks])[0]
    assert not np.allclose(wrong.numpy()[0], cut["logp"].numpy()[0], atol=1e-4)


@pytest.mark.parametrize("recurrent_minibatch_size,steps", [(48, 2 * 2), (0, 2 * 12)])
def test_a_recurrent_learner_takes_as_many_optimizer_steps_as_its_plan_says(
        recurrent_minibatch_size, steps):
    """6 envs x 16 steps = 96 samples, chunks of 4: 48-sample minibatches (12 chunks)
    make 2 steps a pass; unset, minibatch_size 8 makes 12."""
    cfg = small_recurrent(policy_loss="clip", bptt_length=4, update_epochs=2,
                          minibatch_size=8, recurrent_minibatch_size=recurrent_minibatch_size)
    learner, batch = third_batch(cfg)
    before = int(learner.actor_opt.iterations)
    learner.step(batch)
    assert int(learner.actor_opt.iterations) - before == steps
    assert make_plan(cfg, 1).optimizer_steps_per_update == steps


def test_chunk_c_of_sub_env_n_is_column_c_times_n_plus_n():
    T, N, L = 6, 2, 3
    x = tf.reshape(tf.range(T * N * 2), [T, N, 2])  # x[t, n] = [2 (t N + n), 2 (t N + n) + 1]
    states = tf.reshape(tf.range(T * N * 1, dtype=tf.float32), [T, N, 1])
    cut, entered = clipped.chunked({"x": x}, {"s": (states,)}, L)
    for c in range(T // L):
        for n in range(N):
            np.testing.assert_array_equal(cut["x"][:, c * N + n].numpy(),
                                          x[c * L:(c + 1) * L, n].numpy())
            assert entered["s"][0][c * N + n, 0] == states[c * L, n, 0]


def test_a_clipped_lstm_run_with_chunks_learns_cue_memory(tmp_path):
    """CueMemory, solved only with a core (test_recurrent): also with chunks of 8 of its
    rollout's 16 steps."""
    cfg = Config(env=CUE, serial=True, num_workers=1, num_envs=16, rollout_length=16,
                 core="lstm", core_size=32, hidden_sizes=(32,), policy_loss="clip",
                 update_epochs=4, minibatch_size=64, actor_lr=3e-3, critic_lr=3e-3,
                 bptt_length=8, total_env_steps=40_960, seed=0)
    summary = train_quietly(cfg, tmp_path / "run", every_s=5.0)
    assert summary["mean_return_100"] >= 0.9, summary


def test_bptt_length_must_divide_the_rollout_of_a_recurrent_core():
    with pytest.raises(ConfigError, match="bptt_length .5. must divide rollout_length .16."):
        Config(bptt_length=5, core="lstm")
    # a feed-forward run never reads it, and a chunk at least the rollout is the rollout
    assert Config(bptt_length=5).bptt_length == 5
    assert Config(bptt_length=32, rollout_length=16, core="gru").bptt_length == 32
