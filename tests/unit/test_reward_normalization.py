"""normalize_reward: rewards divided by the running std of the discounted return
(VecNormalize's rule), clipped to [-10, 10], then multiplied by reward_scale.

The reference here keeps its own discounted returns from the raw rewards and flags of
each batch, as VecNormalize does, and takes their std with np.std over every sample so
far; it never reads the worker's moments or the learner's statistics to compute what
the learner should have done. The step's metrics are exact functions of the targets
(critic_loss = 0.5 * masked_mean((V - targets)^2), and with advantage normalisation
off actor_loss = -masked_mean(log pi * advantages)), so they show which rewards the
compiled step trained on.
"""

import gymnasium as gym
import numpy as np
import pytest
from batches import pg_step_losses

from distributed_ac.acting.worker import RolloutWorker
from distributed_ac.config.schema import Config
from distributed_ac.learning import advantages
from distributed_ac.learning.learner import Learner

CLIP = 10.0  # the documented clip of |reward / std(return)|
EPS = 1e-8  # the variance epsilon of the running statistics (core/normalization.EPS)
JACKPOT_STEPS = {50: 1e4, 60: -1e4}  # a sub-env's 50th and 60th step() call


class Jackpots(gym.Env):
    """Rewards ~ U(-1, 2) with episodes of 4-11 steps, terminated or truncated at
    random; once the statistics have settled (std ~ 2), two rewards of +-1e4 that any
    std below 1e3 turns into a clipped reward."""

    def __init__(self):
        self.observation_space = gym.spaces.Box(-np.inf, np.inf, (1,), np.float32)
        self.action_space = gym.spaces.Discrete(2)
        self.calls = 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t, self.length = 0, int(self.np_random.integers(4, 12))
        self.truncates = bool(self.np_random.random() < 0.5)
        return np.array([0.0], np.float32), {}

    def step(self, action):
        self.t += 1
        self.calls += 1
        reward = JACKPOT_STEPS.get(self.calls, float(self.np_random.uniform(-1.0, 2.0)))
        end = self.t >= self.length
        return (np.array([self.t / 10], np.float32), reward, end and not self.truncates,
                end and self.truncates, {})


class DiscountedReturns:
    """Each sub-env's discounted return G <- gamma G + r over its real steps, sampled at
    every real step and set back to 0 after the step that ends an episode."""

    def __init__(self, n, gamma):
        self.g, self.gamma, self.samples = np.zeros(n), gamma, []

    def add(self, batch):
        new = []
        for t in range(batch.rewards.shape[0]):
            for n in range(batch.rewards.shape[1]):
                if batch.mask[t, n] == 0:
                    continue
                self.g[n] = self.gamma * self.g[n] + float(batch.rewards[t, n])
                new.append(self.g[n])
                if batch.terminated[t, n] or batch.truncated[t, n]:
                    self.g[n] = 0.0
        self.samples += new
        return np.array(new)

    def var(self):
        """Population variance of every sample so far; 1 before any (the start value)."""
        return float(np.var(self.samples)) if self.samples else 1.0


def losses_of(cfg, batch, v, rewards):
    """(critic loss, actor loss) of a pg step whose GAE targets use `rewards`."""
    targets, adv = advantages.gae(rewards, batch.values, batch.terminated, batch.truncated,
                               batch.mask, cfg.gamma, cfg.gae_lambda)
    return pg_step_losses(v, targets, batch.behaviour_logp, adv, batch.mask)


def test_rewards_are_divided_by_the_return_std_before_the_batch_then_clipped_then_scaled():
    cfg = Config(env="unit.test_reward_normalization:Jackpots", envs_per_worker=4,
                 rollout_length=16, total_env_steps=10_000, mode="sync", normalize_reward=True,
                 reward_scale=0.5, gamma=0.9, gae_lambda=0.95, normalize_advantages=False,
                 hidden_sizes=(8,))
    worker = RolloutWorker(cfg, limit_cpus=False)
    learner = Learner(cfg, worker.space)
    reference = DiscountedReturns(4, cfg.gamma)
    clipped_with_std = unclipped_with_std = 0
    for update in range(7):
        batch = worker.collect(learner.weights())
        std_before = np.sqrt(reference.var() + EPS)
        new = reference.add(batch)
        std_after = np.sqrt(reference.var() + EPS)
        # the batch's moments as the worker sent them: the same discounted returns
        np.testing.assert_allclose(batch.return_moments, [len(new), new.mean(), new.var()],
                                   rtol=1e-6)

        r = batch.rewards.astype(np.float64)
        real = batch.mask == 1
        over = real & (np.abs(r / std_before) > CLIP)
        if update > 0:  # past the start value std = 1, count what this batch exercises
            clipped_with_std += over.sum()
            unclipped_with_std += (real & ~over).sum()
        readings = {
            "documented": np.clip(r / std_before, -CLIP, CLIP) * cfg.reward_scale,
            "std after merging the batch": np.clip(r / std_after, -CLIP, CLIP) * cfg.reward_scale,
            "not clipped": r / std_before * cfg.reward_scale,
            "clipped after scaling": np.clip(r / std_before * cfg.reward_scale, -CLIP, CLIP),
            "not normalised": r * cfg.reward_scale,
        }
        v = learner.nets.critic(batch.obs.reshape(-1, 1)).numpy().reshape(r.shape)
        expected = {k: losses_of(cfg, batch, v, x.astype(np.float32)) for k, x in readings.items()}

        metrics = learner.step(batch)
        got = (metrics["critic_loss"], metrics["actor_loss"])
        np.testing.assert_allclose(got, expected["documented"], rtol=1e-4, atol=1e-6,
                                   err_msg=f"update {update}")
        for other, value in expected.items():  # where this batch tells them apart
            if other != "documented" and not np.allclose(value, expected["documented"],
                                                         rtol=1e-2):
                assert not np.allclose(got, value, rtol=1e-2), (update, other)
        # the learner's running statistics now hold every sample, this batch's too
        stats = learner.return_stats
        assert float(stats.count.numpy()) == len(reference.samples)
        np.testing.assert_allclose(stats.var.numpy()[0], reference.var(), rtol=1e-6)
    # the jackpots were clipped under a learned std, and ordinary rewards were not
    assert clipped_with_std >= 2 and unclipped_with_std > 100, (clipped_with_std,
                                                                 unclipped_with_std)


@pytest.mark.parametrize("reward, std, expected", [
    (35.0, 2.0, 10.0 * 0.3),  # |17.5| > 10: clipped, then scaled
    (-35.0, 2.0, -10.0 * 0.3),
    (3.0, 2.0, 1.5 * 0.3),  # inside the clip: divided and scaled only
])
def test_scaled_rewards_divide_clip_and_scale_in_that_order(reward, std, expected):
    """Objective.scaled_rewards alone, on statistics set by hand: var = std^2."""
    cfg = Config(normalize_reward=True, reward_scale=0.3, envs_per_worker=1, rollout_length=4,
                 total_env_steps=1_000, hidden_sizes=(8,))
    from distributed_ac.envs.vector import probe_space

    learner = Learner(cfg, probe_space(cfg.env))
    learner.return_stats.count.assign(100.0)
    learner.return_stats.var.assign([std ** 2])
    got = learner.objective.scaled_rewards(np.array([[reward]], np.float32))
    assert float(got.numpy()[0, 0]) == pytest.approx(expected, rel=1e-5)
