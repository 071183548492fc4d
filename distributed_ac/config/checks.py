"""The checks a Config runs when it is made (schema.Config.__post_init__): every field's
value of its type, each range and cross-field rule, and a budget that covers one batch.
Each failure is a ConfigError with one line saying what is wrong."""

from __future__ import annotations

import dataclasses
import math
import types
import typing
from typing import Literal

from distributed_ac.core.errors import ConfigError
from distributed_ac.core.policies import parse_mapping


def _check_types(cfg) -> None:
    hints = typing.get_type_hints(type(cfg))
    for f in dataclasses.fields(cfg):
        value = getattr(cfg, f.name)
        if not _matches(value, hints[f.name]):
            raise ConfigError(
                f"config field '{f.name}' must be {_describe(hints[f.name])}, got {value!r}"
            )
        # inf and nan pass every range rule written as a comparison the wrong way round
        # (lr > 0), and YAML spells them .inf and .nan
        if isinstance(value, float) and not math.isfinite(value):
            raise ConfigError(f"config field '{f.name}' must be a finite number, got {value!r}")


def _matches(value, tp) -> bool:
    origin = typing.get_origin(tp)
    if origin is Literal:
        return value in typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        return any(_matches(value, a) for a in typing.get_args(tp))
    if origin is tuple:
        inner = typing.get_args(tp)[0]
        return isinstance(value, tuple) and all(_matches(v, inner) for v in value)
    if tp is type(None):
        return value is None
    if tp is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if tp is int:
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, tp)


def _describe(tp) -> str:
    origin = typing.get_origin(tp)
    if origin is Literal:
        return "one of " + ", ".join(repr(a) for a in typing.get_args(tp))
    if origin in (typing.Union, types.UnionType):
        return " or ".join(_describe(a) for a in typing.get_args(tp))
    if origin is tuple:
        return f"a list of {_describe(typing.get_args(tp)[0])}"
    return "null" if tp is type(None) else getattr(tp, "__name__", str(tp))


def check(c, torso_names: tuple[str, ...]) -> None:
    """Raise ConfigError for the first field of `c` (a Config) whose value is not of its
    type, then for the first range rule it breaks, then for a budget smaller than one
    batch; `torso_names`: the shipped encoders' names (and auto)."""
    _check_types(c)
    for ok, message in _range_rules(c, torso_names):
        if not ok:
            raise ConfigError(message)
    parse_mapping(c.policy_mapping)
    _check_budget_holds_a_batch(c)


def _range_rules(c, torso_names: tuple[str, ...]) -> list[tuple[bool, str]]:
    """(holds, the error if not) for each range rule, in the order they are checked."""
    return [
        # env seeds are drawn from it by NumPy (no negatives); evaluation's start at 2**31 + seed
        (0 <= c.seed < 2**31, "seed must be in [0, 2**31)"),
        (c.num_workers >= 0, "num_workers must be >= 0 (0 = auto)"),
        (c.num_envs >= 1, "num_envs must be >= 1"),
        (c.opponent_pool_size >= 1, "opponent_pool_size must be >= 1"),
        (c.snapshot_every >= 1, "snapshot_every must be >= 1"),
        (0 <= c.train_opponent_share <= 1 and set(c.train_opponents) <= {"random", "greedy"}
         and (c.train_opponent_share == 0 or bool(c.train_opponents)),
         "train_opponent_share must be in [0, 1] and train_opponents among random, greedy "
         "(at least one when the share is above 0)"),
        (not c.self_play or c.core == "none",
         "self_play plays feed-forward policies only (core none): the frozen opponents keep no state"),
        (not c.self_play or not c.policy_mapping,
         "self_play trains one policy against its earlier versions; policy_mapping does not apply"),
        (c.critic_input == "own" or c.core == "none",
         f"critic_input {c.critic_input} takes feed-forward networks (core none): a "
         "recurrent centralised critic is not supported"),
        (c.critic_input == "own" or c.topology != "shared",
         f"critic_input {c.critic_input} needs topology separate: a shared trunk would "
         "feed the critic the actor's own observation"),
        (c.critic_input == "own" or not c.self_play,
         f"critic_input {c.critic_input} is for PettingZoo envs of several agents acting "
         "together; self_play plays one seat"),
        (c.envs_per_worker >= 0, "envs_per_worker must be >= 0 (0 = auto)"),
        (c.frame_size >= -1, "frame_size must be >= -1 (0 = auto, -1 = the env's own size)"),
        (c.frame_stack >= 0, "frame_stack must be >= 0 (0 = auto)"),
        (c.sticky_actions is None or 0 <= c.sticky_actions <= 1, "sticky_actions must be in [0, 1]"),
        (c.rollout_length >= 1, "rollout_length must be >= 1"),
        (c.bptt_length >= 0, "bptt_length must be >= 0 (0 = the whole rollout)"),
        # read only by a recurrent core (a preset's value must not refuse a feed-forward
        # run); at least the rollout's length means the whole rollout
        (c.core == "none" or c.bptt_length == 0 or c.bptt_length >= c.rollout_length
         or c.rollout_length % c.bptt_length == 0,
         f"bptt_length ({c.bptt_length}) must divide rollout_length ({c.rollout_length}) "
         f"(--bptt-length 0: whole rollouts)"),
        (c.worker_cpus > 0, "worker_cpus must be > 0"),
        (c.total_env_steps >= 1, "total_env_steps must be >= 1"),
        (c.max_policy_lag >= 0, "max_policy_lag must be >= 0"),
        (c.batches_per_update >= 0, "batches_per_update must be >= 0 (0 = auto)"),
        (c.learner_threads >= 0, "learner_threads must be >= 0 (0 = auto)"),
        (c.obs_clip > 0, "obs_clip must be > 0"),
        (c.clip_ratio > 0, "clip_ratio must be > 0"),
        (c.kl_coef >= 0, "kl_coef must be >= 0 (0 = no KL penalty)"),
        (c.kl_target > 0, "kl_target must be > 0"),
        (c.update_epochs >= 1 and c.minibatch_size >= 1,
         "update_epochs and minibatch_size must be >= 1"),
        (c.recurrent_minibatch_size >= 0, "recurrent_minibatch_size must be >= 0 (0 = minibatch_size)"),
        (c.max_worker_restarts >= 0, "max_worker_restarts must be >= 0"),
        (c.max_env_failures >= 1 and c.max_nonfinite_updates >= 1 and c.max_nonfinite_batches >= 1,
         "max_env_failures, max_nonfinite_updates and max_nonfinite_batches must be >= 1"),
        (c.rho_bar > 0 and c.c_bar > 0, "rho_bar and c_bar must be > 0"),
        (c.c_bar <= c.rho_bar, f"c_bar ({c.c_bar}) must be <= rho_bar ({c.rho_bar}): "
                               "V-trace assumes it (Espeholt et al. 2018, Remark 1)"),
        (c.torso in torso_names or _names_an_attr(c.torso),
         f"torso must be one of {', '.join(torso_names)} or module:attr (an "
         f"encoder of your own), got {c.torso!r}"),
        (c.core_size >= 0, "core_size must be >= 0 (0 = auto)"),
        (len(c.hidden_sizes) >= 1 and min(c.hidden_sizes) >= 1,
         "hidden_sizes must list at least one positive width"),
        (0.0 <= c.gamma <= 1.0, "gamma must be in [0, 1]"),
        (0.0 <= c.gae_lambda <= 1.0, "gae_lambda must be in [0, 1]"),
        (c.reward_scale > 0, "reward_scale must be > 0"),
        (c.entropy_coef >= 0 and c.vf_coef >= 0, "entropy_coef and vf_coef must be >= 0"),
        (c.vf_loss_clip >= 0, "vf_loss_clip must be >= 0 (0 = no clip)"),
        (c.actor_lr > 0 and c.critic_lr > 0, "actor_lr and critic_lr must be > 0"),
        (c.actor_lr_decay_steps >= 0 and c.critic_lr_decay_steps >= 0,
         "actor_lr_decay_steps and critic_lr_decay_steps must be >= 0 (0 = auto)"),
        (0 < c.actor_lr_decay_rate <= 1 and 0 < c.critic_lr_decay_rate <= 1,
         "actor_lr_decay_rate and critic_lr_decay_rate must be in (0, 1]"),
        (c.adam_epsilon > 0, "adam_epsilon must be > 0"),
        (c.max_grad_norm_actor > 0 and c.max_grad_norm_critic > 0,
         "max_grad_norm_actor and max_grad_norm_critic must be > 0"),
        (c.target_sync_every >= 1, "target_sync_every must be >= 1"),
        (0 < c.target_tau <= 1, "target_tau must be in (0, 1]"),
        (c.bootstrap_values != "learner" or c.core == "none" or target_is_v(c),
         "bootstrap_values learner with a recurrent core needs target_sync_every 1 and "
         "target_tau 1 (V_target = V at each update)"),
        (c.eval_every >= 0, "eval_every must be >= 0 (0 = no evaluation during training)"),
        (c.eval_episodes >= 1, "eval_episodes must be >= 1"),
        (c.log_every_s > 0, "log_every_s must be > 0"),
        (c.checkpoint_every >= 1, "checkpoint_every must be >= 1"),
        (c.stop_timeout_s > 0, "stop_timeout_s must be > 0"),
        (c.keep_checkpoints >= 1, "keep_checkpoints must be >= 1"),
    ]


def _names_an_attr(name: str) -> bool:
    """`module:attr`, each side non-empty (whether it resolves is the models' to say)."""
    module, _, attr = name.partition(":")
    return bool(module) and bool(attr)


def target_is_v(c) -> bool:
    """V_target is synced to V after every update, so it equals V when the next begins."""
    return c.target_sync_every == 1 and c.target_tau == 1


def _check_budget_holds_a_batch(c) -> None:
    """total_env_steps must cover one worker batch: rollout_length x the worker's sub-envs."""
    envs, name = (c.envs_per_worker, "envs_per_worker") if c.envs_per_worker else (c.num_envs, "num_envs")
    if c.total_env_steps < c.rollout_length * envs:
        raise ConfigError(
            f"total_env_steps ({c.total_env_steps}) is smaller than one batch "
            f"(rollout_length x {name} = {c.rollout_length * envs})"
        )
