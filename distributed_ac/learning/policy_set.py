"""Separate policies in one run: a Learner per policy, stepped on its agents' columns.

With `policy_mapping` each policy is a whole Learner of its own: actor, critic, V_target,
the two optimizers with their schedules and clipping, and the return statistics, all
trained only on the rows of the agents mapped to it (core/policies.py cuts them from the
update's batch). `LearnerSet` offers the Learner's face to the Trainer, the checkpointer
and evaluation (step, weights, plan, checkpoint objects), so the loop is the same as for
one policy. Its versions count the updates in which any policy moved; the Weights bundle
holds every policy's parts, each name prefixed with its policy.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from distributed_ac.config.plan import RunPlan
from distributed_ac.config.schema import Config
from distributed_ac.core.batch import Batch, Weights
from distributed_ac.core.policies import (
    PolicyGroups,
    batch_columns,
    groups_for,
    joined_weights,
)
from distributed_ac.envs.space import EnvSpace
from distributed_ac.learning import bundle
from distributed_ac.learning.learner import Learner, Versions
from distributed_ac.learning.networks import build_networks, checkpoint_objects
from distributed_ac.models.spec import ModelSpec

SEED_STRIDE = 1000  # policy k initialises and shuffles from seed + k * SEED_STRIDE


def learner_for(cfg: Config, space: EnvSpace):
    """The run's learner: a Learner, or a LearnerSet with policy_mapping."""
    groups = groups_for(space.agent_names, cfg.policy_mapping, cfg.env)
    return Learner(cfg, space) if groups is None else LearnerSet(cfg, space, groups)


@dataclasses.dataclass
class NetworksSet:
    """Each policy's networks, by policy name."""

    by_policy: dict

    @property
    def spec(self) -> ModelSpec:
        return next(iter(self.by_policy.values())).spec


def networks_for(cfg: Config, space: EnvSpace, spec: ModelSpec, seed: int = 0):
    """Networks laid out as the run's learner holds them (restored, not trained, here)."""
    groups = groups_for(space.agent_names, cfg.policy_mapping, cfg.env)
    if groups is None:
        return build_networks(spec, space, seed)
    return NetworksSet({p: build_networks(spec, space, seed) for p in groups.names})


def network_objects(nets) -> dict:
    """checkpoint_objects of Networks, or of every policy's, each name prefixed."""
    if not isinstance(nets, NetworksSet):
        return checkpoint_objects(nets)
    return {f"{p}/{k}": obj for p, n in nets.by_policy.items()
            for k, obj in checkpoint_objects(n).items()}


def weights_of(nets) -> Weights:
    """bundle.weights_of, joined over the policies of a NetworksSet (versions 0)."""
    if not isinstance(nets, NetworksSet):
        return bundle.weights_of(nets)
    return joined_weights({p: bundle.weights_of(n) for p, n in nets.by_policy.items()}, 0, 0)


class LearnerSet:
    """A Learner per policy of `groups`, with the Learner's interface."""

    def __init__(self, cfg: Config, space: EnvSpace, groups: PolicyGroups):
        self.cfg, self.space, self.groups = cfg, space, groups
        self.learners = {p: Learner(dataclasses.replace(cfg, seed=cfg.seed + k * SEED_STRIDE),
                                    space)
                         for k, p in enumerate(groups.names)}
        first = next(iter(self.learners.values()))
        self.device, self.threads, self.spec = first.device, first.threads, first.spec
        self.inter_op_threads = first.inter_op_threads
        self.objective = first.objective  # one update rule for every policy
        self.nets = NetworksSet({p: lr.nets for p, lr in self.learners.items()})
        self.updates = self.policy_version = 0
        self._saved = Versions()

    @property
    def target_version(self) -> int:
        return sum(lr.target_version for lr in self.learners.values())

    @property
    def skipped_updates(self) -> int:
        return sum(lr.skipped_updates for lr in self.learners.values())

    def step(self, batch: Batch) -> dict[str, float]:
        """Each policy's update on its agents' columns; the metrics are the policies'
        means (and each policy's under `policy/<name>/`); applied if any policy moved."""
        rows = batch.rewards.shape[1]
        by_policy = {p: lr.step(batch_columns(batch, self.groups.columns(p, rows), k))
                     for k, (p, lr) in enumerate(self.learners.items())}
        applied = any(m["applied"] for m in by_policy.values())
        if applied:
            self.updates += 1
            self.policy_version += 1
        common = set.intersection(*(set(m) for m in by_policy.values())) - {"applied"}
        metrics = {k: float(np.mean([m[k] for m in by_policy.values()])) for k in sorted(common)}
        for p, m in by_policy.items():
            metrics.update({f"policy/{p}/{k}": v for k, v in m.items() if k != "applied"})
        return {**metrics, "applied": applied}

    def weights(self) -> Weights:
        return joined_weights({p: lr.weights() for p, lr in self.learners.items()},
                              self.policy_version, self.target_version)

    def plan(self, plan: RunPlan) -> dict[str, int]:
        """Learner.plan for each policy, on its share of the learner batch's rows."""
        spans = {}
        for p, lr in self.learners.items():
            rows = len(self.groups.members[p])
            spans = lr.plan(dataclasses.replace(plan, rows_per_env=rows))
        return spans

    def warm_up(self) -> None:
        for lr in self.learners.values():
            lr.warm_up()

    def set_rates(self, actor_lr: float, critic_lr: float, entropy_coef: float) -> None:
        for lr in self.learners.values():
            lr.set_rates(actor_lr, critic_lr, entropy_coef)

    def checkpoint_objects(self) -> dict:
        objects = {f"{p}/{k}": obj for p, lr in self.learners.items()
                   for k, obj in lr.checkpoint_objects().items()}
        return {**objects, "policy_set": self._saved}

    def before_save(self) -> None:
        for lr in self.learners.values():
            lr.before_save()
        self._saved.updates.assign(np.int64(self.updates))
        self._saved.policy_version.assign(np.int64(self.policy_version))

    def after_restore(self) -> None:
        for lr in self.learners.values():
            lr.after_restore()
        self.updates = int(self._saved.updates.numpy())
        self.policy_version = int(self._saved.policy_version.numpy())
