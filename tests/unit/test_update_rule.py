"""The update rule a Config resolves to: the lag correction that applies, whose values a
pg update bootstraps from, and how a run plan settles bootstrap_values auto."""

import dataclasses

import pytest

from distributed_ac.config.plan import RunPlan
from distributed_ac.config.rule import UpdateRule
from distributed_ac.config.schema import Config


def plan(workers: int, batches_per_update: int) -> RunPlan:
    return RunPlan(workers=workers, envs=(1,) * workers, rollout_length=16,
                   batches_per_update=batches_per_update, minibatches=1, epochs=1, updates=10)


@pytest.mark.parametrize("fields, correction, bootstrap", [
    (dict(mode="sync"), "none", "worker"),  # on-policy: nothing to correct or recompute
    (dict(mode="async"), "vtrace", "auto"),
    (dict(mode="async", off_policy_correction="truncated_is"), "truncated_is", "auto"),
    (dict(mode="async", off_policy_correction="none"), "none", "auto"),
    (dict(mode="async", policy_loss="clip"), "vtrace", "worker"),
    (dict(mode="async", bootstrap_values="learner"), "vtrace", "learner"),
    (dict(mode="async", bootstrap_values="worker"), "vtrace", "worker"),
    # a recurrent V_target that may differ from V cannot be recomputed without its state
    (dict(mode="async", core="lstm", target_sync_every=3), "vtrace", "worker"),
    (dict(mode="async", core="lstm"), "vtrace", "auto"),
])
def test_the_rule_a_config_resolves_to(fields, correction, bootstrap):
    rule = UpdateRule.of(dataclasses.replace(Config(), **fields))
    assert (rule.correction, rule.bootstrap) == (correction, bootstrap)
    assert rule.recomputes_values == (bootstrap != "worker")


@pytest.mark.parametrize("workers, per_update, expected", [
    (4, 1, "learner"), (4, 2, "learner"), (4, 4, "worker"), (1, 1, "worker")])
def test_auto_bootstraps_from_the_learner_only_when_an_update_joins_fewer_batches_than_workers(
        workers, per_update, expected):
    rule = UpdateRule.of(dataclasses.replace(Config(), mode="async"))
    assert rule.bootstrap_for(plan(workers, per_update)) == expected
    pinned = UpdateRule.of(dataclasses.replace(Config(), mode="async", bootstrap_values="worker"))
    assert pinned.bootstrap_for(plan(workers, per_update)) == "worker"
