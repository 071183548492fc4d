"""RolloutWorker: batch layout, the NEXT_STEP reset mask, termination vs truncation."""

import numpy as np
from batches import zero_weights

from distributed_ac.acting.worker import RolloutWorker
from distributed_ac.config.schema import Config
from distributed_ac.core.batch import Batch, Weights
from distributed_ac.envs.space import EnvSpace


def worker(env="fakes:Countdown", n=2, t=8, **kw) -> RolloutWorker:
    cfg = Config(env=env, envs_per_worker=n, rollout_length=t, total_env_steps=10_000, **kw)
    return RolloutWorker(cfg, worker_id=1, limit_cpus=False)


def test_batch_is_time_major_float32_and_tagged_with_versions():
    w = worker()
    b = w.collect(zero_weights(w.space))
    assert b.obs.shape == (8, 2, 1) and b.obs.dtype == np.float32
    assert b.rewards.shape == b.mask.shape == b.terminated.shape == (8, 2)
    assert b.values.shape == (9, 2) and b.values.dtype == np.float32
    assert (b.policy_version, b.target_version, b.worker_id) == (7, 3, 1)
    assert b.env_steps == 16


def test_reset_step_after_an_episode_end_is_masked():
    w = worker()  # episodes of 3 steps: steps 0,1,2 real, step 3 is the reset step
    b = w.collect(zero_weights(w.space))
    np.testing.assert_array_equal(b.mask[:, 0], [1, 1, 1, 0, 1, 1, 1, 0])
    np.testing.assert_array_equal(b.terminated[:, 0], [0, 0, 1, 0, 0, 0, 1, 0])
    assert not b.truncated.any()
    # obs after the reset step starts over from 0
    np.testing.assert_array_equal(b.obs[:, 0, 0], [0, 1, 2, 3, 0, 1, 2, 3])


def test_mask_carries_across_collect_calls():
    w = worker(t=4)  # steps 0-2 real, 3 reset; next batch starts real again
    first = w.collect(zero_weights(w.space))
    second = w.collect()
    np.testing.assert_array_equal(first.mask[:, 0], [1, 1, 1, 0])
    np.testing.assert_array_equal(second.mask[:, 0], [1, 1, 1, 0])
    w5 = worker(t=3)  # ends exactly on the done step: the next batch opens with the reset
    w5.collect(zero_weights(w5.space))
    assert w5.collect().mask[0, 0] == 0


def obs_dependent_weights(space: EnvSpace) -> Weights:
    """zero_weights, but V_target(obs) = 0.5 + tanh(0.25 * obs[0]) (tanh hidden layer): a
    different value for every Countdown observation, so a test can tell which one was used."""
    w = zero_weights(space)
    (w0, b0), (w1, _) = w.parts["v_target.encoder"], w.parts["v_target.head"]
    w0[0, 0], b0[:], w1[0, 0] = 0.25, 0.0, 1.0
    return w


def v_target(obs: float) -> float:
    return 0.5 + np.tanh(0.25 * obs)


def test_truncation_is_kept_apart_from_termination():
    w = worker(env="fakes:CountdownTruncated")
    b = w.collect(zero_weights(w.space))
    np.testing.assert_array_equal(b.truncated[:, 0], [0, 0, 1, 0, 0, 0, 1, 0])
    assert not b.terminated.any()


def test_a_truncated_step_bootstraps_from_v_target_of_the_real_final_observation():
    w = worker(env="fakes:CountdownTruncated", activation="tanh")
    b = w.collect(obs_dependent_weights(w.space))
    # Steps 2 and 6 are truncated after 3 steps: each returned the real final obs [3.0]
    # (the reset obs [0.0] comes one step later, under NEXT_STEP autoreset).
    truncated = np.flatnonzero(b.truncated[:, 0])
    np.testing.assert_array_equal(truncated, [2, 6])
    np.testing.assert_allclose(b.values[truncated + 1, 0], v_target(3.0), rtol=1e-6)
    assert not np.isclose(v_target(3.0), [v_target(0.0), v_target(2.0)]).any()
    # and every other entry is V_target of its own observation; the last is of the
    # reset obs [0.0] that step 7, the reset step, returned
    np.testing.assert_allclose(b.values[:, 0], v_target(np.r_[b.obs[:, 0, 0], 0.0]), rtol=1e-6)


def test_episode_returns_count_only_real_steps():
    w = worker()
    b = w.collect(zero_weights(w.space))
    np.testing.assert_array_equal(b.episode_returns, [3.0] * 4)
    np.testing.assert_array_equal(b.episode_lengths, [3] * 4)


def test_concat_joins_workers_along_the_env_axis():
    w = worker()
    wt = zero_weights(w.space)
    a, b = w.collect(wt), worker().collect(wt)
    joined = Batch.concat([a, b])
    assert joined.obs.shape == (8, 4, 1) and joined.values.shape == (9, 4)
    assert len(joined.episode_returns) == 8
