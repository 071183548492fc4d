"""The Weights bundle read from the networks: the actor's parts (with normalize_obs the
observation statistics the workers apply before it) and V_target's, by part name. The
Learner publishes it after every update; a run's restored networks (`dac evaluate`,
`dac export`) read it the same way."""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from distributed_ac.core.batch import Weights
from distributed_ac.models.spec import OBS_NORM


def part_tensors(nets, part_names) -> dict[str, list]:
    """{part: its arrays}, read as tensors (inside the learner's step this saves an eager
    read per variable)."""
    return {n: [tf.identity(v.value) for v in vs] for n, vs in nets.bundle(part_names).items()}


def actor_tensors(nets) -> dict[str, list]:
    """The actor's parts, and with normalize_obs the observation statistics (mean and
    1 / std)."""
    tensors = part_tensors(nets, nets.spec.actor_parts)
    norm = nets.obs_norm
    if norm is not None:
        tensors[OBS_NORM] = [tf.cast(norm.mean, tf.float32), norm.inv_std()]
    return tensors


def as_numpy(parts: dict) -> dict[str, list[np.ndarray]]:
    return {n: [np.asarray(a) for a in arrays] for n, arrays in parts.items()}


def weights_of(nets, policy_version: int = 0, target_version: int = 0) -> Weights:
    """The whole bundle as the networks hold it now."""
    return Weights(policy_version, target_version,
                   {**as_numpy(actor_tensors(nets)),
                    **as_numpy(part_tensors(nets, nets.spec.target_parts))})
