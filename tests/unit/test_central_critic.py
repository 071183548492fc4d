"""The centralised critic (critic_input, envs/central.py) on scripted PettingZoo envs
whose observations and state are known (parallel_envs.Relay and StatefulRelay): its
input rows against hand-built arrays, the worker's V_target values and the learner's
critic reading them (and not the actor's observations), and the refusals."""

import dataclasses
import re

import numpy as np
import pytest

pytest.importorskip("pettingzoo")

from distributed_ac.acting.worker import RolloutWorker  # noqa: E402
from distributed_ac.config.plan import make_plan  # noqa: E402
from distributed_ac.config.schema import Config  # noqa: E402
from distributed_ac.core.batch import Weights  # noqa: E402
from distributed_ac.core.errors import ConfigError, EnvError  # noqa: E402
from distributed_ac.envs.central import CRITIC_KEY  # noqa: E402
from distributed_ac.envs.vector import make_vector_env, probe_space  # noqa: E402

RELAY, STATEFUL = "parallel_envs:Relay", "parallel_envs:StatefulRelay"
IDS = np.tile(np.eye(3, dtype=np.float32), (2, 1))  # 2 copies x agents a, b, c


def critic_rows(env: str, mode: str, actions=None):
    """info[CRITIC_KEY] of two copies after reset, and after one step of `actions`."""
    venv = make_vector_env(env, 2, critic_input=mode)
    _, info = venv.reset(seed=[1, 2])
    rows = [info[CRITIC_KEY]]
    if actions is not None:
        rows.append(venv.step(np.asarray(actions))[4][CRITIC_KEY])
    venv.close()
    return rows


def test_the_state_critic_reads_each_copy_s_global_state_then_the_agent_s_one_hot():
    reset, step = critic_rows(STATEFUL, "central", [2, 1, 0, 0, 1, 0])
    # state [k, last action of a, b, c]: -1 before any; c is not alive at step 0, so its
    # action is not taken
    want_reset = np.hstack([np.tile([0, -1, -1, -1], (6, 1)), IDS])
    want_step = np.hstack([np.repeat([[1, 2, 1, -1], [1, 0, 1, -1]], 3, axis=0), IDS])
    np.testing.assert_array_equal(reset, want_reset.astype(np.float32))
    np.testing.assert_array_equal(step, want_step.astype(np.float32))
    assert reset.dtype == np.float32


def test_the_joint_critic_reads_every_agent_s_observation_in_possible_agents_order():
    """Relay has no state_space, so central is joint: agent j observes [k, its last
    action + 1], an agent not alive zeros (c before step 3); then the row's own id."""
    reset, step = critic_rows(RELAY, "central", [2, 1, 0, 0, 1, 0])
    np.testing.assert_array_equal(reset, np.hstack([np.zeros((6, 6)), IDS]))
    copy0, copy1 = [1, 3, 1, 2, 0, 0], [1, 1, 1, 2, 0, 0]
    np.testing.assert_array_equal(step, np.hstack([np.repeat([copy0, copy1], 3, axis=0), IDS]))
    # joint can be asked for where the env has a state too
    assert critic_rows(STATEFUL, "joint")[0].shape == (6, 3 * 2 + 3)


def test_the_env_space_and_the_model_spec_carry_the_critic_s_width():
    from distributed_ac.models.spec import ModelSpec

    assert probe_space(STATEFUL, critic_input="state").critic_width == 4 + 3
    assert probe_space(RELAY, critic_input="joint").critic_width == 3 * 2 + 3
    assert probe_space(RELAY).critic_width == 0
    cfg = Config(env=RELAY, critic_input="joint", total_env_steps=10_000)
    spec = ModelSpec.of(cfg, probe_space(RELAY, critic_input="joint"))
    assert spec.critic_width == 9 and not spec.shared  # topology auto: separate


def dense_weights(space, rng, hidden=4) -> Weights:
    """Random weights: the actor over the observation, V_target over the critic's rows."""
    def dense(n_in, n_out):
        return [rng.normal(size=(n_in, n_out)).astype(np.float32),
                rng.normal(size=n_out).astype(np.float32)]

    return Weights(1, 1, {"actor.encoder": dense(space.obs_dim, hidden),
                          "actor.head": dense(hidden, space.num_actions),
                          "v_target.encoder": dense(space.critic_width, hidden),
                          "v_target.head": dense(hidden, 1)})


def test_the_worker_bootstraps_from_v_target_of_the_critic_s_rows_over_t_plus_1_steps():
    cfg = Config(env=STATEFUL, envs_per_worker=2, rollout_length=6, hidden_sizes=(4,),
                 critic_input="state", total_env_steps=10_000)
    w = RolloutWorker(cfg, limit_cpus=False)
    weights = dense_weights(w.space, np.random.default_rng(0))
    b = w.collect(weights)
    assert b.critic_obs.shape == (7, 6, 7) and b.obs.shape == (7 - 1, 6, 2 + 3)
    (w1, b1), (w2, b2) = weights.parts["v_target.encoder"], weights.parts["v_target.head"]
    want = (np.tanh(b.critic_obs @ w1 + b1) @ w2 + b2)[..., 0]
    np.testing.assert_allclose(b.values, want, rtol=1e-5, atol=1e-5)
    # the state at each step's observation: k counts the copy's steps, 5 at the final
    # observation, then 0 after the NEXT_STEP reset step
    np.testing.assert_array_equal(b.critic_obs[:, 0, 0], [0, 1, 2, 3, 4, 5, 0])
    # the state of the copy is every agent's row's; the last columns are the ids
    np.testing.assert_array_equal(b.critic_obs[:, 0, :4], b.critic_obs[:, 2, :4])
    np.testing.assert_array_equal(b.critic_obs[3, :, 4:], IDS)


@pytest.mark.parametrize("loss", ["pg", "clip"])
def test_the_learner_s_critic_reads_the_critic_s_rows_not_the_actor_s_observations(loss):
    """The critic loss moves with the critic's rows and not with the observations (the
    actor's input), with the learner's own bootstrap values (V_target on the rows)."""
    from distributed_ac.learning.learner import Learner

    cfg = Config(env=RELAY, envs_per_worker=2, rollout_length=12, mode="sync",
                 hidden_sizes=(8,), critic_input="joint", policy_loss=loss,
                 bootstrap_values="learner", minibatch_size=1_000, update_epochs=1,
                 total_env_steps=10_000)
    w = RolloutWorker(cfg, limit_cpus=False)
    b = w.collect(Learner(cfg, w.space).weights())

    def critic_loss(batch):
        learner = Learner(cfg, w.space)  # the same seed: the same initial networks
        learner.plan(make_plan(cfg, 1, w.space.agents))
        assert learner.nets.critic.input_shape == (None, 9)
        return learner.step(batch)["critic_loss"]

    base = critic_loss(b)
    other_obs = dataclasses.replace(b, obs=b.obs + 5.0)
    other_rows = dataclasses.replace(b, critic_obs=b.critic_obs + 5.0)
    assert critic_loss(other_obs) == pytest.approx(base, rel=1e-6)
    assert critic_loss(other_rows) != pytest.approx(base, rel=1e-3)


def test_separate_policies_each_read_their_agents_critic_rows():
    cfg = Config(env=STATEFUL, envs_per_worker=2, rollout_length=6, hidden_sizes=(4,),
                 critic_input="state", policy_mapping=("a=first", "*=others"),
                 total_env_steps=10_000)
    from distributed_ac.learning.policy_set import learner_for

    w = RolloutWorker(cfg, limit_cpus=False)
    learner = learner_for(cfg, w.space)
    b = w.collect(learner.weights())
    m = learner.step(b)
    assert m["applied"] and {"policy/first/critic_loss", "policy/others/critic_loss"} <= set(m)
    for lr in learner.learners.values():
        assert lr.nets.critic.input_shape == (None, 7)


@pytest.mark.parametrize("fields, says", [
    (dict(core="lstm"), "critic_input central takes feed-forward networks (core none)"),
    (dict(topology="shared"), "critic_input central needs topology separate"),
    (dict(self_play=True), "critic_input central is for PettingZoo envs of several agents"),
])
def test_what_a_centralised_critic_cannot_go_with_is_one_config_error(fields, says):
    with pytest.raises(ConfigError, match=re.escape(says)):
        Config(env=RELAY, critic_input="central", **fields)


@pytest.mark.parametrize("env, mode, says", [
    ("CartPole-v1", "central", "critic_input central is for PettingZoo envs of several "
                               "agents; 'CartPole-v1' is a Gymnasium env"),
    (RELAY, "state", "critic_input state: 'parallel_envs:Relay' has no state_space"),
])
def test_an_env_that_cannot_feed_the_critic_is_refused_in_one_line(env, mode, says):
    with pytest.raises(EnvError, match=re.escape(says)) as e:
        probe_space(env, critic_input=mode)
    assert "\n" not in str(e.value)
