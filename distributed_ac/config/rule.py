"""The update rule: what a Config's mode, policy loss, lag correction and bootstrap values
mean for one update, resolved once (beside the run plan, plan.py) and read by the
learner's objective, the run plan's file and the summary.

    mode     correction   the targets and advantages
    sync     (none)       GAE: the batch was made by the policy it trains (A2C / PPO)
    async    vtrace       V-trace targets and advantages (IMPALA)
    async    truncated_is GAE, advantages weighted by min(rho_bar, pi / mu)
    async    none         GAE as in sync mode, the lag left uncorrected

A pg update in async mode may bootstrap from the learner's V_target at the update rather
than the values its worker computed (bootstrap_values); a recurrent V_target's pass would
need its own core state, which the batch does not carry, so with a core only V_target = V
is recomputed (as V).
"""

from __future__ import annotations

import dataclasses
from typing import Literal

from distributed_ac.config.checks import target_is_v
from distributed_ac.config.plan import RunPlan
from distributed_ac.config.schema import Config


@dataclasses.dataclass(frozen=True)
class UpdateRule:
    loss: Literal["pg", "clip"]
    correction: Literal["vtrace", "truncated_is", "none"]
    """The lag correction that applies: "none" in sync mode, whatever the Config says."""
    bootstrap: Literal["auto", "learner", "worker"]
    """Whose values a pg update bootstraps from; "worker" wherever the learner cannot
    recompute them; "auto" until a plan decides (`bootstrap_for`)."""
    target_is_v: bool
    """V_target equals V when an update begins (synced after every one, exactly)."""

    @staticmethod
    def of(cfg: Config) -> "UpdateRule":
        recomputable = (cfg.mode == "async" and cfg.policy_loss == "pg"
                        and (cfg.core == "none" or target_is_v(cfg)))
        return UpdateRule(loss=cfg.policy_loss,
                          correction=cfg.off_policy_correction if cfg.mode == "async" else "none",
                          bootstrap=cfg.bootstrap_values if recomputable else "worker",
                          target_is_v=target_is_v(cfg))

    @property
    def recomputes_values(self) -> bool:
        """The learner may bootstrap from its own V_target (auto or learner)."""
        return self.bootstrap != "worker"

    def bootstrap_for(self, plan: RunPlan) -> Literal["learner", "worker"]:
        """bootstrap resolved for a run: auto takes the learner's values when an update
        joins fewer worker batches than there are workers (a batch is then older than
        one version), the worker's when it joins one from each (lag 1)."""
        if self.bootstrap == "auto":
            return "learner" if plan.batches_per_update < plan.workers else "worker"
        return self.bootstrap
