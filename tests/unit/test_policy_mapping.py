"""Separate policies (policy_mapping): which agent's rows each policy owns, the Batch and
Weights of one policy cut from the run's, the worker's PolicySet acting for each policy
on its own rows, and the LearnerSet's policies each trained on their agents' columns
alone, each checked against an independent form (explicit index lists, a lone Learner
trained on columns cut by hand)."""

import dataclasses

import numpy as np
import pytest

pytest.importorskip("pettingzoo")

from distributed_ac.acting.policies import PolicySet, policy_for  # noqa: E402
from distributed_ac.acting.numpy_policy import Policy  # noqa: E402
from distributed_ac.acting.worker import RolloutWorker  # noqa: E402
from distributed_ac.config.schema import Config, from_dict  # noqa: E402
from distributed_ac.core.batch import Batch, Weights  # noqa: E402
from distributed_ac.core.errors import ConfigError, EnvError  # noqa: E402
from distributed_ac.core.normalization import merge_all  # noqa: E402
from distributed_ac.core.policies import (  # noqa: E402
    batch_columns,
    episodes_by_policy,
    groups_for,
    joined_weights,
    policy_weights,
)

AGENTS = ("adversary_0", "agent_0", "agent_1")
MATCH = "parallel_envs:MatchId"  # agents agent_0, agent_1, agent_2


def test_each_agent_takes_the_first_entry_that_matches_it_names_or_wildcards():
    groups = groups_for(AGENTS, ("adversary_*=adv", "agent_*=good"), "env")
    assert groups.names == ("adv", "good")
    assert groups.members == {"adv": (0,), "good": (1, 2)}
    first_wins = groups_for(AGENTS, ("agent_1=solo", "*=rest"), "env")
    assert first_wins.members == {"solo": (2,), "rest": (0, 1)}
    assert first_wins.names == ("solo", "rest")  # the order the mapping names them


@pytest.mark.parametrize("entries, message", [
    (("agent_*=good",), "agent 'adversary_0' of 'env' matches no policy_mapping entry"),
    (("*=all", "agent_9=nine"), "entry agent_9=nine names no agent of 'env'"),
])
def test_a_mapping_that_misses_an_agent_or_names_an_unknown_one_is_refused(entries, message):
    with pytest.raises(EnvError, match=message):
        groups_for(AGENTS, entries, "env")


def test_separate_policies_for_an_env_of_one_agent_are_refused():
    with pytest.raises(EnvError, match="not a PettingZoo env of several agents"):
        groups_for((), ("a=b",), "CartPole-v1")


@pytest.mark.parametrize("entry", ["agent_0", "agent_0=", "=red", "agent_0=red team"])
def test_a_malformed_entry_is_a_config_error(entry):
    with pytest.raises(ConfigError, match="must be agent=policy"):
        Config(policy_mapping=(entry,))


def test_yaml_takes_the_mapping_as_a_mapping_or_as_entries():
    assert from_dict({"policy_mapping": {"agent_0": "red", "agent_*": "blue"}}).policy_mapping \
        == ("agent_0=red", "agent_*=blue")
    assert from_dict({"policy_mapping": ["agent_0=red"]}).policy_mapping == ("agent_0=red",)


def test_a_policy_owns_the_columns_of_its_agents_in_every_copy():
    groups = groups_for(AGENTS, ("adversary_*=adv", "*=good"), "env")
    np.testing.assert_array_equal(groups.columns("adv", 9), [0, 3, 6])
    np.testing.assert_array_equal(groups.columns("good", 9), [1, 2, 4, 5, 7, 8])


def _batch(T=3, N=6, policies=2) -> Batch:
    rng = np.random.default_rng(0)
    f = lambda *shape: rng.normal(size=shape).astype(np.float32)  # noqa: E731
    return Batch(obs={"image": rng.integers(0, 255, (T, N, 2, 2, 1), np.uint8), "vec": f(T, N, 3)},
                 actions=rng.integers(0, 4, (T, N)).astype(np.int32), rewards=f(T, N),
                 terminated=f(T, N), truncated=f(T, N), mask=f(T, N), behaviour_logp=f(T, N),
                 values=f(T + 1, N), policy_version=4, target_version=2,
                 starts=f(T, N), core_state={"actor.core": [f(N, 5), f(N, 5)]},
                 action_mask=rng.random((T, N, 4)) > 0.3,
                 return_moments=np.array([[3, 0.5, 2.0], [6, -1.0, 1.0]][:policies]))


def test_a_policy_s_batch_holds_exactly_its_columns_of_every_field():
    batch, cols = _batch(), [1, 2, 4, 5]
    sub = batch_columns(batch, np.array(cols), 1)
    for name in ("actions", "rewards", "terminated", "truncated", "mask", "behaviour_logp",
                 "values", "starts", "action_mask"):
        full = getattr(batch, name)
        np.testing.assert_array_equal(getattr(sub, name),
                                      np.stack([full[:, c] for c in cols], axis=1))
    for key in ("image", "vec"):
        np.testing.assert_array_equal(sub.obs[key][:, 2], batch.obs[key][:, 4])
    np.testing.assert_array_equal(sub.core_state["actor.core"][1][3],
                                  batch.core_state["actor.core"][1][5])
    np.testing.assert_array_equal(sub.return_moments, [6, -1.0, 1.0])
    assert (sub.policy_version, sub.target_version) == (4, 2)


def test_joined_batches_merge_each_policy_s_return_moments_on_their_own():
    a, b = _batch(), dataclasses.replace(_batch(), return_moments=np.array([[1, 2.0, 0.0],
                                                                           [2, 0.0, 4.0]]))
    joined = Batch.concat([a, b])
    for p in range(2):
        np.testing.assert_allclose(joined.return_moments[p],
                                   merge_all([a.return_moments[p], b.return_moments[p]]))


def test_the_joined_bundle_gives_each_policy_back_its_own_parts():
    red = Weights(1, 1, {"actor.head": [np.ones(2)], "v_target.head": [np.zeros(1)]})
    blue = Weights(1, 1, {"actor.head": [np.full(2, 5.0)], "v_target.head": [np.ones(1)]})
    joined = joined_weights({"red": red, "blue": blue}, version=9, target_version=4)
    assert sorted(joined.parts) == ["blue/actor.head", "blue/v_target.head",
                                    "red/actor.head", "red/v_target.head"]
    back = policy_weights(joined, "blue")
    assert (back.version, back.target_version) == (9, 4)
    np.testing.assert_array_equal(back.parts["actor.head"][0], [5.0, 5.0])
    assert sorted(back.parts) == ["actor.head", "v_target.head"]


def test_ended_episodes_go_to_the_policy_of_their_agent():
    groups = groups_for(AGENTS, ("adversary_*=adv", "*=good"), "env")
    rows = np.array([0, 4, 5, 6])  # copies 0, 1, 1, 2: agents 0, 1, 2, 0
    batch = dataclasses.replace(_batch(), episode_returns=np.array([1.0, 2.0, 3.0, 4.0]),
                                episode_ends=(np.array([0, 1, 2, 2], np.int64) << 32) + rows)
    by = episodes_by_policy([batch], groups)
    np.testing.assert_array_equal(by["adv"], [1.0, 4.0])
    np.testing.assert_array_equal(by["good"], [2.0, 3.0])


def _match_cfg(**fields) -> Config:
    return Config(env=MATCH, envs_per_worker=2, num_envs=2, rollout_length=5, agent_id=False,
                  hidden_sizes=(8,), policy_mapping=("agent_0=solo", "*=pair"), **fields)


def test_each_policy_acts_for_its_own_rows_as_it_would_alone():
    cfg = _match_cfg()
    worker = RolloutWorker(cfg, 0, limit_cpus=False)
    policies = worker.policy
    assert isinstance(policies, PolicySet) and list(policies.policies) == ["solo", "pair"]
    space = worker.space
    rng = np.random.default_rng(1)
    own = {}
    for p in ("solo", "pair"):
        parts = {"actor.encoder": [rng.normal(size=(1, 8)).astype(np.float32),
                                   rng.normal(size=8).astype(np.float32)],
                 "actor.head": [rng.normal(size=(8, 3)).astype(np.float32), np.zeros(3, np.float32)],
                 "v_target.encoder": [rng.normal(size=(1, 8)).astype(np.float32), np.zeros(8, np.float32)],
                 "v_target.head": [rng.normal(size=(8, 1)).astype(np.float32), np.zeros(1, np.float32)]}
        own[p] = Weights(3, 1, parts)
    policies.load(joined_weights(own, 3, 1))
    obs = rng.normal(size=(6, 1)).astype(np.float32)
    noise = rng.random((6, 3))
    stored, _, logp = policies.act(obs, None, noise=noise)
    values = policies.rollout_values(obs.reshape(1, 6, 1), np.zeros((1, 6), bool))
    for p, cols in (("solo", [0, 3]), ("pair", [1, 2, 4, 5])):
        alone = Policy(space, policies.spec)
        alone.load(own[p])
        s, _, lp = alone.act(obs[cols], None, noise=noise[cols])
        np.testing.assert_array_equal(stored[cols], s)
        np.testing.assert_array_equal(logp[cols], lp)
        np.testing.assert_array_equal(values[0, cols], alone.value(obs[cols]))


def test_one_policy_without_a_mapping():
    cfg = dataclasses.replace(_match_cfg(), policy_mapping=())
    assert isinstance(policy_for(cfg, RolloutWorker(cfg, 0, limit_cpus=False).space), Policy)


def test_each_policy_of_the_learner_set_trains_on_its_agents_columns_alone():
    """One update of the LearnerSet leaves each policy's networks where a lone Learner,
    built with that policy's seed and stepped on the columns of its agents cut by hand,
    leaves its own: no row of another agent reaches a policy."""
    from distributed_ac.learning.learner import Learner
    from distributed_ac.learning.policy_set import SEED_STRIDE, LearnerSet

    cfg = _match_cfg(policy_loss="clip", update_epochs=2, minibatch_size=5,
                     normalize_reward=True)
    worker = RolloutWorker(cfg, 0, limit_cpus=False)
    space = worker.space
    groups = groups_for(space.agent_names, cfg.policy_mapping, cfg.env)
    learners = LearnerSet(cfg, space, groups)
    batch = worker.collect(learners.weights())
    assert batch.return_moments.shape == (2, 3)  # one row per policy, of its real steps
    assert batch.return_moments[0][0] == batch.mask[:, [0, 3]].sum()
    assert batch.return_moments[1][0] == batch.mask[:, [1, 2, 4, 5]].sum()
    assert learners.step(batch)["applied"] and learners.policy_version == 1
    for k, (p, cols) in enumerate((("solo", [0, 3]), ("pair", [1, 2, 4, 5]))):
        alone = Learner(dataclasses.replace(cfg, seed=cfg.seed + k * SEED_STRIDE), space)
        cut = dataclasses.replace(
            batch, obs=batch.obs[:, cols], actions=batch.actions[:, cols],
            rewards=batch.rewards[:, cols], terminated=batch.terminated[:, cols],
            truncated=batch.truncated[:, cols], mask=batch.mask[:, cols],
            behaviour_logp=batch.behaviour_logp[:, cols], values=batch.values[:, cols],
            return_moments=batch.return_moments[k])
        alone.step(cut)
        for a, b in zip(alone.nets.actor.weights + alone.nets.critic.weights,
                        learners.learners[p].nets.actor.weights
                        + learners.learners[p].nets.critic.weights):
            np.testing.assert_array_equal(a.numpy(), b.numpy())
    weights = learners.weights()
    assert weights.version == 1 and {n.split("/")[0] for n in weights.parts} == {"solo", "pair"}
