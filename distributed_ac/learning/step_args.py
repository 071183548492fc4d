"""The compiled step's input: the signature it is traced with, a Batch's fields in that
order and form (Learner._run_step packs them with these), and StepInput, the one
structure the step's graph functions read them from (`step_input` unpacks the traced
arguments into it, once).

The five [T, N] float fields travel as one [5, T, N] array (pack_per_step): a concrete
function's call costs Python time per argument it binds.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np
import tensorflow as tf

from distributed_ac.core.batch import Batch
from distributed_ac.envs.space import EnvSpace
from distributed_ac.learning import inputs
from distributed_ac.learning.networks import Sequence
from distributed_ac.models.cores import state_size
from distributed_ac.models.spec import ACTOR_CORE, TARGET_CORE, ModelSpec


def step_signature(space: EnvSpace, spec: ModelSpec, T: int) -> list:
    """The step's input signature: observations, actions, the packed [T, N] rows, values,
    return moments, then action masks and core states where the run has them."""
    f32 = tf.float32
    obs = inputs.obs_signature(space, T)
    act = tf.TensorSpec([T, None, *space.action_shape], tf.as_dtype(space.action_dtype))
    rows = 6 if spec.recurrent else 5
    states = ([tf.TensorSpec([None, spec.core_size], f32)] * 2 * state_size(spec.core)
              if spec.recurrent else [])
    legal = [tf.TensorSpec([T, None, space.mask_size], tf.bool)] if space.mask_size else []
    critic = ([tf.TensorSpec([T + 1, None, space.critic_width], f32)]
              if space.critic_width else [])
    return [obs, act, tf.TensorSpec([rows, T, None], f32),
            tf.TensorSpec([T + 1, None], f32), tf.TensorSpec([3], tf.float64), *legal,
            *critic, *states]


class StepInput(NamedTuple):
    """One batch inside the compiled step, time-major (as Acme's `sample.data` or RLlib's
    batch dict): [T, N] rows unless said otherwise."""

    obs: Any
    """The raw observations [T, N, ...] (a dict of arrays for a mixed observation)."""
    actions: tf.Tensor
    rewards: tf.Tensor
    terminated: tf.Tensor
    truncated: tf.Tensor
    mask: tf.Tensor
    """1 for a real step, 0 for padding after a worker's slot ended."""
    behaviour_logp: tf.Tensor
    values: tf.Tensor
    """[T + 1, N]: V_target's values as the worker computed them, then the next state's."""
    return_moments: tf.Tensor
    """[3] float64: count, mean and M2 of the batch's discounted returns."""
    legal: tf.Tensor | None = None
    """[T, N, mask_size] bool action masks, None when the env has none."""
    seq: Sequence | None = None
    """How a recurrent core unrolls the rows (None without a core)."""
    critic_obs: tf.Tensor | None = None
    """[T + 1, N, critic_width]: a centralised critic's input (None: it reads obs)."""

    @property
    def shape(self):
        return tf.shape(self.rewards)

    @property
    def critic_rows(self):
        """A centralised critic's input at the T steps as flat rows [T * N, critic_width]
        (the bootstrap step's value is the worker's); None when the critic reads obs."""
        if self.critic_obs is None:
            return None
        return tf.reshape(self.critic_obs[:-1], [-1, self.critic_obs.shape[-1]])


def step_input(space: EnvSpace, spec: ModelSpec, obs, actions, per_step, values,
               return_moments, *rest) -> StepInput:
    """The traced step's arguments (step_signature's order) as one StepInput."""
    rewards, term, trunc, mask, behaviour_logp, *starts = tf.unstack(per_step)
    legal, states = (rest[0], rest[1:]) if space.mask_size else (None, rest)
    critic, states = (states[0], states[1:]) if space.critic_width else (None, states)
    seq = None
    if spec.recurrent:  # [T, N] rows unrolled from the stored states
        k = len(states) // 2
        seq = Sequence(tf.shape(rewards), tuple(states[:k]), tuple(states[k:]), starts[0])
    return StepInput(obs, actions, rewards, term, trunc, mask, behaviour_logp, values,
                     return_moments, legal, seq, critic)


def pack_per_step(batch: Batch, recurrent: bool = False) -> np.ndarray:
    """[5, T, N]: rewards, terminated, truncated, mask, behaviour_logp (the step's order);
    [6, T, N] with a recurrent core: then starts."""
    rows = [batch.rewards, batch.terminated, batch.truncated, batch.mask, batch.behaviour_logp]
    return np.stack(rows + [batch.starts] if recurrent else rows).astype(np.float32, copy=False)


def core_states(spec: ModelSpec, batch: Batch) -> list:
    """The actor's core state, then the critic's, as the step takes them. Workers run
    V_target, not V, so a separate critic starts from V_target's state: V's copy as of
    the weights the batch was made with."""
    if not spec.recurrent:
        return []
    critic = CORE_OF_CRITIC[spec.shared]
    return [*batch.core_state[ACTOR_CORE], *batch.core_state[critic]]


CORE_OF_CRITIC = {True: ACTOR_CORE, False: TARGET_CORE}  # by topology: shared?


def legal_of(space: EnvSpace, batch: Batch) -> list:
    """The batch's action masks as the step takes them ([] when the env has none)."""
    return [batch.action_mask] if space.mask_size else []


def critic_of(space: EnvSpace, batch: Batch) -> list:
    """A centralised critic's input as the step takes it ([] when the critic reads obs)."""
    return [batch.critic_obs] if space.critic_width else []


def zero_core_state(spec: ModelSpec, n: int, T: int) -> dict:
    """A recurrent batch's `starts` and `core_state` for n sub-envs that all start an
    episode at step 0 (empty without a core): for synthetic and warm-up batches."""
    if not spec.recurrent:
        return {}
    k, h = state_size(spec.core), spec.core_size
    zero = [np.zeros((n, h), np.float32) for _ in range(k)]
    starts = np.zeros((T, n), np.float32)
    starts[0] = 1.0
    return {"starts": starts, "core_state": {p: list(zero) for p in (ACTOR_CORE, TARGET_CORE)}}


def all_allowed(space: EnvSpace, n: int, T: int) -> np.ndarray | None:
    """Action masks allowing every action, for synthetic batches (None without masks)."""
    return np.ones((T, n, space.mask_size), bool) if space.mask_size else None


def blank_batch(space: EnvSpace, spec: ModelSpec, T: int, n: int, reward: float = 0.0,
                versions: tuple[int, int] = (0, 0)) -> Batch:
    """A [T, n] batch of zero observations and actions, every step real and every
    reward `reward` (NaN: a batch the step skips), with zero core states and masks
    allowing every action; `versions`: its (policy, V_target) versions."""
    f32 = np.float32
    zeros = np.zeros((T, n), f32)
    return Batch(obs=inputs.zero_obs(space, n, T),
                 actions=np.zeros((T, n, *space.action_shape), space.action_dtype),
                 rewards=np.full((T, n), reward, f32), terminated=zeros, truncated=zeros,
                 mask=np.ones((T, n), f32), behaviour_logp=zeros,
                 values=np.zeros((T + 1, n), f32), policy_version=versions[0],
                 target_version=versions[1], **zero_core_state(spec, n, T),
                 action_mask=all_allowed(space, n, T),
                 critic_obs=(np.zeros((T + 1, n, space.critic_width), f32)
                             if space.critic_width else None))
