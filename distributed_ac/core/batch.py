"""The two things that travel: a Batch (worker -> learner) and Weights (learner -> workers).

Both are plain dataclasses of NumPy arrays so Ray moves them without TensorFlow, and
both carry versions so the learner can measure and bound policy lag.

Shapes are time-major: T = rollout_length, N = sub-envs (summed over workers after
`Batch.concat`). Rewards and values are float32; observations are float32 vectors, or
images [T, N, H, W, C] that stay uint8 (4x fewer bytes to ship) until the learner's graph.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from distributed_ac.core.normalization import merge_all
from distributed_ac.core.obs import concat


@dataclasses.dataclass
class Batch:
    # the observation the action was taken in: [T, N, obs_dim] float32 or [T, N, H, W, C]
    # uint8; an image beside vector entries: a dict, one [T, N, ...] array per entry
    obs: np.ndarray | dict
    actions: np.ndarray  # [T, N] int32 (Discrete) or [T, N, A] float32 pre-tanh sample u (Box)
    rewards: np.ndarray  # [T, N] float32, unscaled env rewards
    terminated: np.ndarray  # [T, N] float32 0/1: episode ended in a terminal state
    truncated: np.ndarray  # [T, N] float32 0/1: episode cut by a time limit (bootstrap)
    mask: np.ndarray  # [T, N] float32: 0 on NEXT_STEP reset steps (action ignored), else 1
    behaviour_logp: np.ndarray  # [T, N] float32: log pi_behaviour(action | obs)
    values: np.ndarray  # [T+1, N] float32: V_target(obs_t); values[t+1] is the obs step t returned
    policy_version: int
    target_version: int
    worker_id: int = 0
    episode_returns: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros(0))
    episode_lengths: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros(0, np.int64))
    # where each episode ended: the rollout step x 2**32 + the sub-env's index in the run
    # (episodes_in_order sorts an update's episodes by it)
    episode_ends: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros(0, np.int64))
    nonfinite: str = ""  # why this batch must not be trained on ('' = all finite)
    # seconds the worker sat idle between handing in its previous batch and starting this
    # one: how long the driver and learner held it back (backpressure); summed on concat
    idle_s: float = 0.0
    # recurrent cores: 1 where a sub-env's episode starts at step t (its state is zeroed
    # there), and each core's state at the rollout's first step, before that zeroing
    # ({"actor.core": [h, (c)], "v_target.core": [...]}, arrays [N, H]); None without a core
    starts: np.ndarray | None = None  # [T, N] float32
    core_state: dict | None = None
    # invalid-action masking: the masks the actions were sampled under, 1 = allowed
    # (a reset step's all 1); None when the env has no action_mask
    action_mask: np.ndarray | None = None  # [T, N, num_actions] bool
    # critic_input state or joint: what the critic reads at each observation and at the
    # bootstrap one after the last step (envs/central.py); None when it reads obs
    critic_obs: np.ndarray | None = None  # [T+1, N, critic_width] float32
    # [count, mean, var] of the sub-envs' discounted returns over this batch's steps
    # (normalize_reward; zeros otherwise, which the learner's merge ignores)
    return_moments: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros(3))

    @property
    def env_steps(self) -> int:
        """Environment steps this batch cost (reset steps included: the env did step)."""
        return int(self.rewards.size)

    @staticmethod
    def concat(batches: list["Batch"], same_version: bool = True) -> "Batch":
        """Join batches from several workers along the sub-env axis N.

        Sync mode (`same_version`): all must come from the same policy and V_target
        versions; that is what makes a sync update on-policy. Async mode joins batches
        of different ages: each column keeps its own behaviour log-probs and V_target
        values, which is all V-trace needs; the joined batch carries the oldest versions.
        """
        if len(batches) == 1:
            return batches[0]
        versions = {(b.policy_version, b.target_version) for b in batches}
        if same_version and len(versions) != 1:
            raise ValueError(f"cannot concat batches made by different versions: {versions}")
        arrays = {
            f.name: concat([getattr(b, f.name) for b in batches], axis=1)
            for f in dataclasses.fields(Batch)
            if f.name in ARRAY_FIELDS
        }
        recurrent = batches[0].starts is not None
        return Batch(
            **arrays,
            policy_version=min(b.policy_version for b in batches),
            target_version=min(b.target_version for b in batches),
            worker_id=-1,
            idle_s=sum(b.idle_s for b in batches),
            episode_returns=np.concatenate([b.episode_returns for b in batches]),
            episode_lengths=np.concatenate([b.episode_lengths for b in batches]),
            episode_ends=np.concatenate([b.episode_ends for b in batches]),
            return_moments=_merged_moments([b.return_moments for b in batches]),
            starts=np.concatenate([b.starts for b in batches], axis=1) if recurrent else None,
            action_mask=(np.concatenate([b.action_mask for b in batches], axis=1)
                         if batches[0].action_mask is not None else None),
            critic_obs=(np.concatenate([b.critic_obs for b in batches], axis=1)
                        if batches[0].critic_obs is not None else None),
            core_state=({part: [np.concatenate([b.core_state[part][i] for b in batches])
                                for i in range(len(arrays_))]
                         for part, arrays_ in batches[0].core_state.items()}
                        if recurrent else None),
        )


def _merged_moments(stats: list[np.ndarray]) -> np.ndarray:
    """merge_all of each policy's row ([policies, 3] with separate policies) or of the
    one [3]."""
    if stats[0].ndim == 2:
        return np.stack([merge_all([s[p] for s in stats]) for p in range(len(stats[0]))])
    return merge_all(stats)


def episode_end(step: int, sub_envs: np.ndarray, first: int = 0) -> np.ndarray:
    """Batch.episode_ends of episodes that ended at rollout `step` in sub-envs `first` +
    `sub_envs` (indices in the run). One array op: it runs at every step that ends one."""
    return np.asarray(sub_envs, np.int64) + ((int(step) << 32) + int(first))


def episodes_in_order(batches: list[Batch]) -> tuple[np.ndarray, np.ndarray]:
    """(returns, lengths) of the episodes that ended in one update's batches, by the step
    they ended at, then their sub-env's index in the run: the order one worker stepping
    every sub-env lists them in, so a 100-episode window holds the same episodes at any
    worker count."""
    returns = np.concatenate([b.episode_returns for b in batches])
    lengths = np.concatenate([b.episode_lengths for b in batches])
    order = np.argsort(np.concatenate([b.episode_ends for b in batches]), kind="stable")
    return returns[order], lengths[order]


ARRAY_FIELDS = ("obs", "actions", "rewards", "terminated", "truncated", "mask",
                "behaviour_logp", "values")


@dataclasses.dataclass
class Weights:
    """A versioned bundle the learner publishes once per version: each part's arrays under
    its name ("actor.encoder", "actor.head", "actor.log_std", "v_target.encoder",
    "v_target.head", "obs_norm"; models/spec.py), in the order that part's Keras layer
    gives them (`bundle_variables`) and its NumPy twin reads them. The shared topology's
    encoder travels once, as the actor's; V_target always has its own."""

    version: int
    target_version: int
    parts: dict[str, list[np.ndarray]]

    @property
    def nbytes(self) -> int:
        return sum(a.nbytes for arrays in self.parts.values() for a in arrays)
