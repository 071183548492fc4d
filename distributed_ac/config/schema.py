"""The one typed configuration: a frozen dataclass, a docstring per field.

`Config` is what a run *is*: it is written to the run directory as YAML and read back
on resume. Values come from the defaults below, then a YAML file, then command-line
flags (tyro builds those from the field docstrings). The checks (config/checks.py: types,
ranges, cross-field rules) run in `__post_init__`, so an invalid Config cannot exist:
every mistake is a `ConfigError` with one line saying what is wrong.
"""

from __future__ import annotations

import dataclasses
import os
import typing
from pathlib import Path
from typing import Literal, Optional, Union

import yaml

from distributed_ac.config import checks
from distributed_ac.core.activations import ACTIVATIONS
from distributed_ac.core.errors import ConfigError


# The shipped encoders (models/registry.py's SHIPPED, which the config sits below and
# cannot read; tests/unit/test_registry.py keeps the two equal) and auto. Config.torso
# also takes a user's encoder as module:attr, which only the models can resolve.
TorsoName = Literal["auto", "mlp", "mlp_ln", "nature", "impala", "small"]
# The activations the workers can compute in NumPy: that table's names, read, not copied
ActivationName = Literal[tuple(ACTIVATIONS)]


@dataclasses.dataclass(frozen=True)
class Config:
    # --- environment -------------------------------------------------------------
    env: str = "CartPole-v1"
    """Gymnasium id (e.g. CartPole-v1) or a `module:Class` / `module:function` entry point."""
    gym_packages: tuple[str, ...] = ()
    """Modules imported before the env is made, in every process that makes one (workers, evaluator, `dac evaluate`; installed on every node that runs workers), for packages that register their ids on import (minigrid, shimmy, popgym); `module:function` also calls the function (MinAtar: minatar.gym:register_envs). YAML: a list, or one name."""
    vectorization: Literal["auto", "vector_entry_point", "sync", "async"] = "auto"
    """How sub-envs are stepped: auto = the env's numpy-vectorized entry point if it has one, else sync; async = one process per sub-env (spawn)."""
    seed: int = 0
    """Seed for environments, network initialisation and action sampling."""
    frame_size: int = 0
    """Image observations (the observation, or a Dict's image entry): resize frames to frame_size x frame_size (needs OpenCV); 0 = auto: 84 for ALE ids and for frames with a side over 128 px (VizDoom, CarRacing, dm_control pixels), the env's own size otherwise; -1 = the env's own size always."""
    categorical_obs: Optional[bool] = None
    """uint8 image observations that are grids of codes (MiniGrid's object, colour and state ids): read each channel as 16 one-hot categories instead of pixels scaled by 1/255; null = auto: on for an image of at most 64x64 whose values over its first 128 random steps stay below 16 in a Box of high 255."""
    grayscale: Optional[bool] = None
    """Image observations: one gray channel instead of RGB (GrayscaleObservation); null = auto: true for ALE ids, false otherwise."""
    frame_stack: int = 0
    """Image observations: stack the newest frame_stack frames along the channels; 0 = auto: 4 for ALE ids, 1 (no stack) otherwise."""
    sticky_actions: Optional[float] = None
    """ALE ids only: probability that the previous action is repeated on each frame (sticky actions, Machado et al. 2018); null = the id's own, 0.25 for the v5 ids."""
    agent_id: bool = True
    """PettingZoo envs of more than one agent (one policy shared by all): each agent's observation gets the one-hot of its index in possible_agents, as an observation entry `agent_id`, so the policy can tell the agents apart; false (--no-agent-id) = the agents' own observations only."""
    policy_mapping: tuple[str, ...] = ()
    """PettingZoo envs: separate policies, as agent=policy entries (the agent a name or a wildcard: --policy-mapping 'adversary_*=adversary' 'agent_*=agent'; YAML: a mapping or a list of entries); each policy has its own actor, critic, optimizers and V_target and trains on its agents' rows, in one run; every agent must match an entry (the first that matches wins). Empty = one policy shared by all agents."""
    critic_input: Literal["own", "central", "state", "joint"] = "own"
    """What the critic (V and V_target) reads in PettingZoo envs of several agents: own = the agent's own observation, as the actor (IPPO); state = the env's global state() (MAPPO's centralised critic); joint = every agent's observation concatenated in possible_agents order; central = state where the env has a state_space, else joint. Beside state or joint the critic reads the one-hot of the agent's index. The actor reads its own observation whatever this says, so acting, evaluate and export need no global state. Not central: feed-forward networks (core none), separate topology, no self_play."""
    self_play: bool = False
    """Two-player turn-based PettingZoo games (an AEC env as module:function, e.g. pettingzoo.classic.connect_four_v3:env): the policy plays one seat, drawn each game, against an opponent drawn from a pool of frozen earlier versions of itself (kept in the run directory's opponents/); evaluation plays eval_opponent and logs the win rate."""
    opponent_pool_size: int = 8
    """self_play: the newest frozen versions the opponent is drawn from (uniformly, one per game)."""
    snapshot_every: int = 10
    """self_play: updates between frozen versions added to the pool (the first is the initial policy)."""
    train_opponents: tuple[str, ...] = ()
    """self_play: fixed players (random, greedy) some training games are played against instead of a frozen version, one drawn uniformly per game, a share train_opponent_share of the games; their moves are ordinary experience. Frozen versions alone never learnt to block (docs/notes/self-play-and-policies.md)."""
    train_opponent_share: float = 0.0
    """self_play: the share of training games, drawn per game, played against one of train_opponents (0 = the pool alone)."""
    eval_opponent: Literal["random", "greedy"] = "greedy"
    """self_play: the fixed player evaluation (and dac evaluate) plays: random legal moves, or greedy (win now, else block a win, else random; tic-tac-toe and connect four)."""

    # --- execution ---------------------------------------------------------------
    mode: Literal["sync", "async"] = "async"
    """sync (A2C): one batch from every worker per update. async (IMPALA-like): update on whichever batch is ready, lag corrected."""
    serial: bool = False
    """Run the same classes in one process without Ray (debugging, exact reproducibility)."""
    callbacks: tuple[str, ...] = ()
    """`module:attr` callbacks run in the driver after each update (distributed_ac.api: a function of the update's metrics, or an object with on_update/on_evaluation/on_checkpoint); one returning False ends the run cleanly. YAML: a list, or one name."""
    num_workers: int = 0
    """Rollout workers; 0 = as many as the CPUs hold (one CPU kept for the learner on a single machine), at most one per sub-env of num_envs."""
    num_envs: int = 32
    """Sub-environments whose rollouts make one learner batch (num_envs x rollout_length samples), split over the workers whatever their count."""
    envs_per_worker: int = 0
    """Sub-environments each worker steps; 0 = auto: num_envs split over the workers. Set, an update joins batches up to num_envs x rollout_length samples."""
    rollout_length: int = 16
    """Steps per sub-env in one batch (T of the [T, N] batch)."""
    worker_cpus: float = 1.0
    """CPUs Ray reserves for each rollout worker; BLAS threads are limited to this share."""
    total_env_steps: int = 500_000
    """Stop after the learner has consumed this many environment steps."""
    stop_at_return: Optional[float] = None
    """Also stop once the 100-episode mean return reaches this value (None = train for the whole budget)."""
    batches_per_update: int = 0
    """Async: worker batches joined into one learner batch; 0 = auto: up to num_envs x rollout_length samples. Policy lag is about workers / this."""
    max_policy_lag: int = 32
    """Async: a batch made more than this many policy versions ago is dropped and counted."""
    off_policy_correction: Literal["vtrace", "truncated_is", "none"] = "vtrace"
    """Async lag correction: V-trace targets, or GAE with truncated importance weights, or none."""
    rho_bar: float = 1.0
    """Clip for importance ratios (V-trace rho-bar / truncated IS)."""
    bootstrap_values: Literal["auto", "learner", "worker"] = "auto"
    """policy_loss pg, async: the V_target values the targets and advantages bootstrap from: the learner's at the update (IMPALA's choice), or those the batch's worker computed with its copy, as old as the batch. auto: the learner's when an update joins fewer worker batches than there are workers, the worker's when it joins one from each (lag 1). The value after the rollout's last step is the worker's either way."""
    vtrace_pg_bootstrap: Literal["vs", "lambda"] = "vs"
    """V-trace actor advantage: bootstrap from vs_{t+1} (the IMPALA paper), or from lambda * vs_{t+1} + (1 - lambda) * V(x_{t+1}) (rlax; GAE's on-policy)."""
    c_bar: float = 1.0
    """V-trace trace-cutting clip c-bar; at most rho_bar (the paper's assumption)."""
    max_worker_restarts: int = 20
    """Replacements of dead or failing rollout workers allowed in one run before it stops."""
    max_env_failures: int = 3
    """Consecutive collect() failures of one worker (env exceptions) before the run stops."""
    on_nonfinite: Literal["stop", "drop"] = "stop"
    """A NaN/Inf observation or reward: stop the run naming env and step, or drop the batch and count it."""
    max_nonfinite_batches: int = 100
    """on_nonfinite drop: a worker's non-finite batches dropped in a row before the run stops as on_nonfinite stop does, naming the env (an env that stays NaN would otherwise be dropped from forever; one finite batch starts the count again)."""
    max_nonfinite_updates: int = 5
    """Consecutive learner updates skipped for a non-finite loss or gradient before the run stops."""
    device: Literal["auto", "cpu", "gpu"] = "auto"
    """Learner device: auto = GPU when TensorFlow sees one, else CPU."""
    learner_thread: bool = False
    """Async mode on Ray, fewer batches an update than workers: each learner step runs on a thread of its own while the driver gathers the next (IMPALA's learner thread)."""
    learner_threads: int = 0
    """TensorFlow threads of the learner; 0 = auto: on a local Ray the cores the workers leave free (at least 1), elsewhere TensorFlow's default."""

    # --- networks ----------------------------------------------------------------
    topology: Literal["auto", "separate", "shared"] = "auto"
    """separate: physically separate actor and critic networks. shared: one trunk (encoder and core) feeding both heads. auto = shared behind a CNN encoder (Stable-Baselines3's CnnPolicy, cleanRL's ppo_atari: the image features are learned once, at half the learner's cost) and with a recurrent core under policy_loss clip (cleanRL's ppo_atari_lstm, Sample Factory: one unroll a minibatch step instead of two), separate otherwise."""
    torso: Union[TorsoName, str] = "auto"
    """The encoder: mlp (hidden_sizes, activation), mlp_ln (the same with LayerNorm after each dense layer, before its activation), nature (the DQN Nature CNN, images of at least 36x36), impala (the IMPALA ResNet) or small (MinAtar's CNN: conv 16 3x3/1, dense 128; images of at least 3x3); auto = nature for images of at least 36x36, small below, mlp for vectors; or your own as `module:attr`, an encoder made by distributed_ac.models.registry.register_encoder (importable on every node that runs workers; docs/guide/own-networks.md)."""
    cnn_precision: Literal["float32", "bfloat16"] = "float32"
    """What a CNN encoder computes in on the learner: bfloat16 = Keras mixed precision (variables, optimizer state, heads and losses stay float32)."""
    hidden_sizes: tuple[int, ...] = (64, 64)
    """Hidden layer widths of each MLP (of the trunk when shared)."""
    activation: ActivationName = "tanh"
    """Hidden activation of MLP encoders (the same function on the learner and, in NumPy, on the workers)."""
    text_obs: Literal["drop", "hash"] = "drop"
    """Text observation entries (Gymnasium Text, MiniGrid's mission): drop = left out of what the networks read (said once at start-up); hash = a hashed bag of words, TEXT_BUCKETS counts of the lower-cased words (crc32 mod TEXT_BUCKETS), read like any vector entry."""
    info_action_mask: bool = False
    """Envs that give their action mask in info["action_mask"] rather than the observation (Gymnasium's Taxi): read it as the observation's action_mask (1 = allowed), applied as any mask is."""
    ignore_action_mask: bool = False
    """Act as if every action were allowed even when the env's Dict observation has an action_mask (a baseline for masking)."""
    observe_action_mask: bool = False
    """Also feed the action_mask to the networks, as 0/1 entries of the observation (it is always applied to the actions unless ignored)."""
    log_std_init: float = 0.0
    """Initial log standard deviation of the Gaussian (continuous actions; state-independent)."""
    core: Literal["none", "lstm", "gru"] = "none"
    """Recurrent core between encoder and heads: none (feed-forward), lstm or gru; its state is kept per sub-env and zeroed at each episode's first step."""
    bptt_length: int = 0
    """policy_loss clip with a recurrent core: its minibatches are chunks of this many steps of a sub-env's rollout, each entered with the core state the policy before the update reached there, gradients stopping at the chunk's start (truncated BPTT, Sample Factory's recurrence); a divisor of rollout_length; 0 (or the rollout's length or more) = the whole rollout. presets/default.yaml sets 16."""
    core_size: int = 0
    """Units of the recurrent core; 0 = auto: 256 behind the nature and impala CNNs, 128 behind the small CNN, as wide as the MLP's last layer behind an MLP."""

    # --- learning ----------------------------------------------------------------
    policy_loss: Literal["pg", "clip"] = "pg"
    """pg: one policy-gradient step per update (A2C in sync mode, IMPALA in async). clip: PPO's clipped surrogate, update_epochs passes of minibatches."""
    clip_ratio: float = 0.2
    """policy_loss clip: the surrogate's ratio is clipped to [1 - clip_ratio, 1 + clip_ratio]."""
    kl_coef: float = 0.0
    """policy_loss clip: initial weight of an adaptive KL penalty beside the clip, kl_coef x KL(pi_old || pi_theta) (the k3 estimate) added to the actor loss, as RLlib's PPO (its kl_coeff 0.2); after each update the weight is x1.5 when the update's mean approx_kl exceeds 2 x kl_target, x0.5 below 0.5 x kl_target. 0 = no penalty."""
    kl_target: float = 0.01
    """policy_loss clip with kl_coef > 0: the KL an update aims at, which adapts kl_coef (RLlib's kl_target)."""
    update_epochs: int = 4
    """policy_loss clip: passes over each learner batch."""
    minibatch_size: int = 64
    """policy_loss clip: samples per minibatch (one step of each optimizer); a batch of n samples is split evenly into round(n / minibatch_size)."""
    recurrent_minibatch_size: int = 0
    """policy_loss clip with a recurrent core: samples per minibatch, made of whole sequences (or bptt_length chunks of them); 0 = minibatch_size. presets/default.yaml sets 256 (16 chunks of 16 steps)."""
    normalize_obs: Optional[bool] = False
    """Normalise observations by running mean and variance, kept by the learner and sent with the weights; null = auto: on for vectors, off for images."""
    obs_clip: float = 10.0
    """With normalize_obs: normalised observations are clipped to [-obs_clip, obs_clip]."""
    normalize_reward: bool = False
    """Divide rewards by the running standard deviation of the discounted return (VecNormalize-style), before reward_scale."""
    gamma: float = 0.99
    """Discount factor."""
    gae_lambda: float = 0.95
    """GAE / V-trace lambda: 0 = one-step TD, 1 = n-step to the end of the rollout (for V-trace's actor advantage see vtrace_pg_bootstrap)."""
    reward_scale: float = 0.1
    """Rewards are multiplied by this before returns are computed."""
    entropy_coef: float = 0.0
    """Weight of the entropy bonus in the actor loss."""
    vf_coef: float = 0.5
    """Shared topology: weight of the critic loss in the trunk's gradient."""
    vf_loss_clip: float = 0.0
    """Each step's squared value error is clipped at this before the critic loss's mean, as RLlib's PPO vf_clip_param (10 there): a step whose value is more than sqrt(vf_loss_clip) off its target gives the critic no gradient. 0 = off."""
    normalize_advantages: bool = True
    """Normalise advantages to zero mean, unit std over the batch's real steps."""
    actor_lr: float = 1e-3
    """Actor optimizer (Adam) initial learning rate."""
    actor_lr_decay_steps: int = 0
    """Actor schedule: optimizer steps per decay period; 0 = auto: the run's planned optimizer steps, so the rate falls by actor_lr_decay_rate once over the budget."""
    actor_lr_decay_rate: float = 0.5
    """Actor schedule: lr multiplier per decay period (1.0 = constant)."""
    critic_lr: float = 1e-3
    """Critic optimizer (Adam) initial learning rate."""
    critic_lr_decay_steps: int = 0
    """Critic schedule: optimizer steps per decay period; 0 = auto, as for the actor."""
    critic_lr_decay_rate: float = 0.5
    """Critic schedule: lr multiplier per decay period (1.0 = constant)."""
    lr_staircase: bool = False
    """Decay both learning rates in discrete steps instead of continuously."""
    adam_epsilon: float = 1e-5
    """Adam epsilon for both optimizers."""
    max_grad_norm_actor: float = 0.5
    """Global-norm clip of the actor's gradients."""
    max_grad_norm_critic: float = 0.5
    """Global-norm clip of the critic's gradients."""
    target_sync_every: int = 1
    """Updates between V_target syncs (V_target <- V)."""
    target_tau: float = 1.0
    """V_target sync weight: 1.0 = exact copy (hard sync); < 1 = Polyak averaging."""

    # --- evaluation during training ---------------------------------------------
    eval_every: int = 0
    """Evaluate the newest weights every this many eval_every_unit (0 = never), on an evaluation actor of its own while training goes on; the best evaluation's weights are kept as the run's best/ checkpoint."""
    eval_every_unit: Literal["updates", "env_steps"] = "updates"
    """What eval_every counts: learner updates or env steps trained on."""
    eval_episodes: int = 10
    """Episodes each evaluation plays (whole games with raw rewards for ALE ids, as dac evaluate)."""
    eval_deterministic: bool = True
    """Evaluate with the most likely action (argmax / tanh of the Gaussian mean); --no-eval-deterministic samples instead."""

    # --- reporting and checkpoints ----------------------------------------------
    log_every_s: float = 2.0
    """Seconds between progress lines / metric rows."""
    checkpoint_every: int = 250
    """Updates between checkpoints (one is also written at the end and on Ctrl-C / SIGTERM); envs are never restarted for one."""
    keep_checkpoints: int = 3
    """How many of the newest checkpoints stay on disk."""
    stop_timeout_s: float = 10.0
    """Seconds a run may take to end after SIGINT / SIGTERM: half-way a wait for batches that still blocks (an env step that hangs) is given up and the last complete update checkpointed; at the end `dac` ends every process under it and exits."""

    # --- Weights & Biases -----------------------------------------------------------
    wandb: bool = False
    """Also log the run to Weights & Biases (pip install 'distributed_ac[wandb]'), from the driver alone: the config, every metrics row TensorBoard gets (the same names, against env_steps), the evaluations and the final summary. The W&B run's id is kept in the run directory (wandb_id), so dac train --resume continues the same W&B run."""
    wandb_project: Optional[str] = None
    """wandb: the W&B project; null = WANDB_PROJECT, else distributed_ac."""
    wandb_entity: Optional[str] = None
    """wandb: the W&B user or team the run belongs to; null = WANDB_ENTITY, else your default one."""
    wandb_group: Optional[str] = None
    """wandb: a W&B group that runs to be compared together share (the seeds of one experiment)."""
    wandb_tags: tuple[str, ...] = ()
    """wandb: tags of the W&B run. YAML: a list, or one tag."""
    wandb_mode: Optional[Literal["online", "offline"]] = None
    """wandb: online = stream to the W&B server (after `wandb login`); offline = write the W&B run under WANDB_DIR (default ./wandb) for `wandb sync` later; null = WANDB_MODE, else online."""

    def __post_init__(self) -> None:
        checks.check(self, typing.get_args(TorsoName))


def minibatch_samples(c: Config) -> int:
    """Samples per clipped-surrogate minibatch: recurrent_minibatch_size where a recurrent
    core is trained on whole sequences and that is set, else minibatch_size."""
    return (c.recurrent_minibatch_size if c.core != "none" and c.recurrent_minibatch_size
            else c.minibatch_size)


FIELD_NAMES = tuple(f.name for f in dataclasses.fields(Config))
# minibatches (a count) became minibatch_size: a count made a larger learner batch take as
# many optimizer steps as a small one
RENAMED = {"minibatches": "minibatch_size, in samples"}


def from_dict(values: dict, base: Config | None = None) -> Config:
    """Config from a mapping of field -> value (YAML types), over `base` or the defaults."""
    unknown = sorted(set(values) - set(FIELD_NAMES))
    renamed = [f"{old} (now {new})" for old, new in RENAMED.items() if old in unknown]
    if renamed:
        raise ConfigError(f"config field(s) renamed: {', '.join(renamed)}")
    if unknown:
        raise ConfigError(f"unknown config field(s): {', '.join(unknown)}")
    hints = typing.get_type_hints(Config)
    coerced = {k: _coerce(v, hints[k]) for k, v in values.items()}
    return dataclasses.replace(base or Config(), **coerced)


def _coerce(value, tp):
    """YAML spells tuples as lists and 1e6 as a float, and a tuple of strings of one as
    the string (`gym_packages: minigrid`): accept those, nothing looser."""
    if isinstance(value, list):
        return tuple(value)
    if isinstance(value, dict) and typing.get_args(tp) == (str, ...):  # policy_mapping
        return tuple(f"{k}={v}" for k, v in value.items())
    if isinstance(value, str) and typing.get_args(tp) == (str, ...):
        return (value,)
    wants_int = tp is int or int in typing.get_args(tp)
    if wants_int and isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def load_yaml(path: str | os.PathLike, base: Config | None = None) -> Config:
    """Read a Config from YAML with safe loading (no code runs); errors are ConfigError."""
    return from_dict(read_mapping(path), base)


def read_mapping(path: str | os.PathLike) -> dict:
    """A YAML file's mapping of field: value, read with safe loading; errors are ConfigError."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as e:
        raise ConfigError(f"cannot read config file {p}: {e.strerror or e}") from None
    except UnicodeDecodeError as e:  # YAML is UTF-8; a Latin-1 editor's file is not
        raise ConfigError(f"config file {p} is not UTF-8 text (byte 0x{e.object[e.start]:02x} "
                          f"at offset {e.start})") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as e:
        where = getattr(e, "problem_mark", None)
        at = f" at line {where.line + 1}" if where else ""
        raise ConfigError(f"config file {p} is not valid YAML{at}") from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(f"config file {p} must hold a mapping of field: value")
    return data


def to_dict(cfg: Config) -> dict:
    out = dataclasses.asdict(cfg)
    return {k: list(v) if isinstance(v, tuple) else v for k, v in out.items()}


def dump_yaml(cfg: Config, path: str | os.PathLike, header: str = "") -> None:
    """Write `cfg` as YAML, after `header` (comment lines) if given."""
    Path(path).write_text(header + yaml.safe_dump(to_dict(cfg), sort_keys=False),
                          encoding="utf-8")
