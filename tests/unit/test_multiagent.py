"""PettingZoo envs as rows (envs/multiagent.py) through the rollout worker and the
learner, on a scripted env whose rewards and ends are known (parallel_envs.Relay): the
rows, rewards and flags, the mask of an agent's rows while it is not alive, the agent-id
entries, and the GAE targets the learner trains on, against an explicit NumPy sum."""

import dataclasses

import numpy as np
import pytest

pytest.importorskip("pettingzoo")

from batches import pg_step_losses, zero_weights  # noqa: E402

from distributed_ac.acting.worker import RolloutWorker  # noqa: E402
from distributed_ac.config.plan import make_plan  # noqa: E402
from distributed_ac.config.schema import Config  # noqa: E402
from distributed_ac.core.errors import EnvError  # noqa: E402
from distributed_ac.envs.multiagent import ACTIVE_KEY  # noqa: E402
from distributed_ac.envs.vector import make_vector_env, probe_space  # noqa: E402

RELAY = "parallel_envs:Relay"
# one copy, five steps then the NEXT_STEP reset step: rows a, b, c over two cycles
MASK = {"a": [1, 1, 1, 1, 1, 0], "b": [1, 1, 0, 0, 0, 0], "c": [0, 0, 0, 1, 1, 0]}
REWARD = {"a": 1.0, "b": 2.0, "c": 3.0}


def relay_worker(copies=2, T=12, **fields) -> RolloutWorker:
    cfg = Config(env=RELAY, envs_per_worker=copies, rollout_length=T, total_env_steps=10_000,
                 **fields)
    return RolloutWorker(cfg, worker_id=0, limit_cpus=False)


def test_a_vector_env_has_a_row_per_possible_agent_of_each_copy():
    venv = make_vector_env(RELAY, 2)
    obs, info = venv.reset(seed=[1, 2])
    assert venv.num_envs == 6 and venv.unwrapped.num_agents == 3
    np.testing.assert_array_equal(info[ACTIVE_KEY], [1, 1, 0, 1, 1, 0])  # c comes later
    np.testing.assert_array_equal(obs["agent_id"], [0, 1, 2, 0, 1, 2])
    np.testing.assert_array_equal(obs["obs"][2], [0, 0])  # not alive: zeros
    venv.close()


def test_the_env_space_reads_the_agent_id_as_a_one_hot_entry_unless_it_is_off():
    space = probe_space(RELAY)
    assert space.agents == 3 and space.obs_dim == 3 + 2 and space.num_actions == 3
    assert [e.name for e in space.obs_entries] == ["agent_id", "obs"]
    assert probe_space(RELAY, agent_id=False).obs_dim == 2


def test_agents_are_rows_with_their_own_rewards_flags_and_mask():
    w = relay_worker()
    assert w.num_envs == 6 and w.first_env == 0
    b = w.collect(zero_weights(w.space))
    assert b.rewards.shape == b.mask.shape == (12, 6) and b.obs.shape == (12, 6, 5)
    for j, agent in enumerate("abc"):
        for row in (j, 3 + j):  # the two copies run the same script
            np.testing.assert_array_equal(b.mask[:, row], MASK[agent] * 2, err_msg=agent)
            np.testing.assert_array_equal(b.rewards[:, row] * b.mask[:, row],
                                          REWARD[agent] * np.array(MASK[agent] * 2))
    t = np.arange(12)
    np.testing.assert_array_equal(b.terminated[:, 1], t % 6 == 1)  # b ends early
    np.testing.assert_array_equal(b.terminated[:, 2], t % 6 == 4)  # c, which came later
    np.testing.assert_array_equal(b.truncated[:, 0], t % 6 == 4)  # a's time limit
    assert not b.terminated[:, 0].any() and not b.truncated[:, 1:3].any()
    # an agent's per-row episode: a 5 steps of 1, b 2 of 2, c 2 of 3, once per cycle and copy
    assert sorted(zip(b.episode_lengths.tolist(), b.episode_returns.tolist())) == \
        sorted([(5, 5.0), (2, 4.0), (2, 6.0)] * 4)


def test_each_row_carries_its_agent_s_one_hot_id_and_observation():
    w = relay_worker(copies=1)
    b = w.collect(zero_weights(w.space))
    np.testing.assert_array_equal(b.obs[:, :, :3], np.broadcast_to(np.eye(3), (12, 3, 3)))
    steps = b.obs[:, :, 3]  # each alive agent observes k, the steps since the reset
    np.testing.assert_array_equal(steps[:6, 0], [0, 1, 2, 3, 4, 5])  # 5: a's final obs
    np.testing.assert_array_equal(steps[:6, 2], [0, 0, 0, 3, 4, 5])  # zeros until c appears
    # the action a row took reaches its own agent: it observes it one step later
    for row in range(3):
        real = np.flatnonzero(b.mask[:-1, row])
        np.testing.assert_array_equal(b.obs[real + 1, row, 4], b.actions[real, row] + 1)


def test_an_agent_appearing_later_starts_its_episode_at_its_first_observation():
    """A recurrent core's state is zeroed where a row's episode starts: c's first real
    step is its arrival (steps 3 and 9), a's and b's the first after each reset."""
    from distributed_ac.learning.learner import Learner

    w = relay_worker(copies=1, core="gru", core_size=4, hidden_sizes=(4,))
    b = w.collect(Learner(w.cfg, w.space).weights())
    first = b.starts * b.mask  # where a row's real steps start an episode
    np.testing.assert_array_equal(np.flatnonzero(first[:, 2]), [3, 9])
    np.testing.assert_array_equal(np.flatnonzero(first[:, 0]), [0, 6])
    np.testing.assert_array_equal(np.flatnonzero(first[:, 1]), [0, 6])


def explicit_gae(rewards, values, terminated, truncated, mask, gamma, lam):
    """A_t = sum_l (gamma lam)^l delta_{t+l} over the rest of the row's episode in the
    rollout, delta_k = r_k + gamma (1 - term_k) V_{k+1} - V_k: each real step's sum
    written out, stopping after the step that ends the episode or the rollout."""
    T, N = rewards.shape
    targets, adv = np.zeros((T, N)), np.zeros((T, N))
    for n in range(N):
        for t in np.flatnonzero(mask[:, n]):
            total, k = 0.0, t
            while True:
                delta = rewards[k, n] + gamma * (1 - terminated[k, n]) * values[k + 1, n] \
                    - values[k, n]
                total += (gamma * lam) ** (k - t) * delta
                if terminated[k, n] or truncated[k, n] or k == T - 1:
                    break
                k += 1
            adv[t, n], targets[t, n] = total, total + values[t, n]
    return targets, adv


def test_the_learner_trains_on_gae_targets_of_the_agents_rows_only():
    """A sync pg step on the Relay batch reports the critic and actor losses of the
    explicit sums' targets and advantages over the real rows: a dead agent's rows, or
    one target bootstrapped across an agent's end, would change them."""
    from distributed_ac.learning.learner import Learner

    cfg = Config(env=RELAY, envs_per_worker=2, rollout_length=12, mode="sync", gamma=0.9,
                 gae_lambda=0.8, reward_scale=1.0, normalize_advantages=False,
                 hidden_sizes=(8,), total_env_steps=10_000)
    w = RolloutWorker(cfg, limit_cpus=False)
    learner = Learner(cfg, w.space)
    learner.plan(make_plan(cfg, 1, w.space.agents))
    b = w.collect(learner.weights())
    obs = b.obs.reshape(-1, w.space.obs_dim)
    shape = b.rewards.shape
    np.testing.assert_allclose(learner.nets.v_target(obs).numpy().reshape(shape), b.values[:-1],
                               rtol=1e-5, atol=1e-6)
    targets, adv = explicit_gae(b.rewards, b.values, b.terminated, b.truncated, b.mask,
                                cfg.gamma, cfg.gae_lambda)
    # by hand: b's terminal step is its reward alone; a's truncation bootstraps from its
    # final observation's value
    assert targets[1, 1] == pytest.approx(2.0)
    assert targets[4, 0] == pytest.approx(1.0 + 0.9 * b.values[5, 0])
    assert not targets[~b.mask.astype(bool)].any()
    v = learner.nets.critic(obs).numpy().reshape(shape)
    logp = learner.objective.policy_terms(learner.nets.actor(obs), b.actions.reshape(-1),
                                          shape)[0].numpy()
    want = pg_step_losses(v, targets.astype(np.float32), logp, adv.astype(np.float32), b.mask)
    metrics = learner.step(b)
    np.testing.assert_allclose((metrics["critic_loss"], metrics["actor_loss"]), want,
                               rtol=1e-4, atol=1e-6)
    with_dead_rows = pg_step_losses(v, targets, logp, adv, np.ones_like(b.mask))
    assert not np.allclose(want, with_dead_rows, rtol=1e-3)


def test_rows_are_numbered_in_the_run_copy_by_copy():
    """A second worker's first row follows the first worker's last: its copies' index
    in the run times the agents, so episodes sort the same at any worker count."""
    cfg = Config(env=RELAY, envs_per_worker=2, rollout_length=4, total_env_steps=10_000)
    w = RolloutWorker(cfg, worker_id=1, limit_cpus=False, num_envs=2, first_env=2)
    assert (w.num_envs, w.first_env) == (6, 6)
    plan = make_plan(cfg, 2, rows_per_env=3)
    assert plan.learner_batch == 2 * 2 * 3 * 4 and "(x 3 agents)" in plan.describe("async")


def test_an_aec_env_that_may_be_parallel_is_stepped_through_aec_to_parallel():
    pytest.importorskip("mpe2")
    venv = make_vector_env("parallel_envs:spread_aec", 1)
    obs, info = venv.reset(seed=0)
    assert venv.num_envs == 3 and info[ACTIVE_KEY].all() and obs["obs"].shape == (3, 18)
    venv.close()


@pytest.mark.parametrize("env, says", [
    ("parallel_envs:not_an_env", "made a dict, not a Gymnasium Env nor a PettingZoo"),
    ("parallel_envs:Mismatched", "agent_1: Box(-1.0, 1.0, (2,), float32), agent_2: Discrete(3)); "
                                 "only Discrete actions (start 0) can be padded"),
    ("parallel_envs:TakingTurns", "does not set is_parallelizable"),
])
def test_what_cannot_be_rows_of_one_policy_is_refused_in_one_line(env, says):
    with pytest.raises(EnvError) as e:
        probe_space(env)
    assert says in str(e.value) and "\n" not in str(e.value)


def test_async_vectorization_and_image_preprocessing_are_refused_for_pettingzoo_envs():
    with pytest.raises(EnvError, match="vectorization auto or sync, not async"):
        probe_space(RELAY, "async")
    from distributed_ac.envs.atari import Preprocess

    with pytest.raises(EnvError, match="apply to Gymnasium envs only"):
        probe_space(RELAY, preprocess=Preprocess(frame_stack=4))


def test_gymnasium_envs_keep_one_row_each():
    w = RolloutWorker(Config(envs_per_worker=3, rollout_length=4), limit_cpus=False)
    assert (w.num_envs, w.space.agents, w._active) == (3, 1, None)
    assert dataclasses.replace(make_plan(w.cfg, 1)).rows_per_env == 1
