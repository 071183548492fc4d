"""Sections of the Config, for the parts that read only one: the flags and the YAML stay
flat (one Config), and a part's constructor takes the section it reads, made from a
Config with `Section.of(cfg)`. Each field is the Config field of the same name (its
docstring there says what it does; tests/unit/test_config_sections.py holds the names
and types to the Config's)."""

from __future__ import annotations

import dataclasses
from typing import Literal, TypeVar

from distributed_ac.config.schema import Config

S = TypeVar("S")


class _Section:
    @classmethod
    def of(cls: type[S], cfg: Config) -> S:
        """This section's fields of `cfg`."""
        return cls(**{f.name: getattr(cfg, f.name) for f in dataclasses.fields(cls)})


@dataclasses.dataclass(frozen=True)
class OptimizerSettings(_Section):
    """The actor's and the critic's Adam, schedule and gradient clip (optimizers.py)."""

    actor_lr: float
    actor_lr_decay_steps: int
    actor_lr_decay_rate: float
    critic_lr: float
    critic_lr_decay_steps: int
    critic_lr_decay_rate: float
    lr_staircase: bool
    adam_epsilon: float
    max_grad_norm_actor: float
    max_grad_norm_critic: float


@dataclasses.dataclass(frozen=True)
class LossSettings(_Section):
    """What an update minimises (objective.py): returns, advantages and the losses. The
    choice of correction and bootstrap values is the update rule's (rule.py)."""

    gamma: float
    gae_lambda: float
    rho_bar: float
    c_bar: float
    vtrace_pg_bootstrap: Literal["vs", "lambda"]
    clip_ratio: float
    kl_coef: float
    kl_target: float
    normalize_advantages: bool
    vf_coef: float
    vf_loss_clip: float
    entropy_coef: float
    reward_scale: float


SECTIONS = (OptimizerSettings, LossSettings)
