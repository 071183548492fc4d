"""CartPole-v1's 500-step time limit on its own numpy-vectorized env.

vectorization "auto" gives CartPole gymnasium's CartPoleVectorEnv (the spec's
vector_entry_point), which counts steps and resets sub-envs itself: none of Gymnasium's
TimeLimit or autoreset wrappers are involved. A RolloutWorker on it must still record
the time limit as `truncated` (bootstrapped), never as `terminated`, and the step after
it as a mask-0 reset step, the same as for a sync-vectorized env.

A policy that balances the pole reaches the limit: a fixed linear controller, acted out
through the worker's own MLP policy with near-deterministic logits.
"""

import numpy as np
import pytest
from batches import zero_weights
from gymnasium.envs.classic_control.cartpole import CartPoleVectorEnv

from distributed_ac.acting.worker import RolloutWorker
from distributed_ac.config.schema import Config
from distributed_ac.core.batch import Weights

LIMIT = 500  # CartPole-v1's max_episode_steps
ENVS = 3
# push right when 0.5 x + x' + 10 theta + 3 theta' > 0: holds the pole for 500 steps
CONTROLLER = np.array([0.5, 1.0, 10.0, 3.0], np.float32)


def v_target(obs):
    """What the weights below make V_target: a different value for every observation."""
    return np.tanh(0.5 * obs.sum(axis=-1))


def balancing_weights(space) -> Weights:
    """One tanh hidden unit h = tanh(100 c.obs) and logits (-30 h, 30 h): the controller,
    away from its decision boundary with probability ~1. V_target = tanh(0.5 sum(obs))."""
    w = zero_weights(space, hidden=(1,))
    (a0, _), (a1, _) = w.parts["actor.encoder"], w.parts["actor.head"]
    a0[:, 0], a1[0] = 100 * CONTROLLER, [-30.0, 30.0]
    (v0, c0), (v1, c1) = w.parts["v_target.encoder"], w.parts["v_target.head"]
    v0[:, 0], c0[:], v1[0, 0], c1[:] = 0.5, 0.0, 1.0, 0.0
    return w


@pytest.mark.parametrize("rollout_length", [128, 100])
def test_the_time_limit_is_a_truncation_followed_by_a_masked_reset_step(rollout_length):
    """128: step 499 and its reset step fall inside one batch. 100: step 499 is the last
    step of a batch and the reset step opens the next one."""
    cfg = Config(env="CartPole-v1", envs_per_worker=ENVS, rollout_length=rollout_length,
                 total_env_steps=10_000)
    worker = RolloutWorker(cfg, limit_cpus=False)
    assert isinstance(worker.envs, CartPoleVectorEnv)  # the numpy-vectorized env, unwrapped
    weights = balancing_weights(worker.space)
    batches = [worker.collect(weights) for _ in range(-(-(LIMIT + 20) // rollout_length))]
    joined = {k: np.concatenate([getattr(b, k) for b in batches])
              for k in ("terminated", "truncated", "mask", "rewards", "obs")}
    term, trunc, mask = joined["terminated"], joined["truncated"], joined["mask"]
    end = LIMIT - 1  # the 500th step

    # every sub-env: 500 real steps, the last one truncated and none terminated
    np.testing.assert_array_equal(trunc[:end], 0)
    np.testing.assert_array_equal(trunc[end], 1)
    np.testing.assert_array_equal(term[:end + 1], 0)
    np.testing.assert_array_equal(mask[:end + 1], 1)
    # then one reset step: masked, reward 0, no flag; then a new episode
    np.testing.assert_array_equal(mask[end + 1], 0)
    np.testing.assert_array_equal(joined["rewards"][end + 1], 0)
    assert not trunc[end + 1].any() and not term[end + 1].any()
    np.testing.assert_array_equal(mask[end + 2:], 1)
    # the reset step acts in the final observation and returns the reset one (uniform
    # in +-0.05), in which the next episode's first step acts
    obs = joined["obs"]
    assert np.abs(obs[end + 2]).max() <= 0.05
    assert not np.allclose(obs[end + 1], obs[end + 2])

    # the truncated step bootstraps from V_target of the real final observation
    b, t = divmod(end, rollout_length)
    final_obs = obs[end + 1]
    np.testing.assert_allclose(batches[b].values[t + 1], v_target(final_obs), rtol=1e-5)
    # and the worker reports the whole episode: 500 steps, return 500
    ended = np.concatenate([x.episode_lengths for x in batches])
    np.testing.assert_array_equal(ended, [LIMIT] * ENVS)
    np.testing.assert_array_equal(np.concatenate([x.episode_returns for x in batches]),
                                  [float(LIMIT)] * ENVS)
