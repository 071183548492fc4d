"""Synthetic inputs for `dac bench`'s phases: a Weights bundle with the parts the learner
publishes, and [T, N] batches of the env's shapes and dtypes with plausible flags.

Nothing here imports TensorFlow unless a bundle needs a Learner's parts, and then in a
fresh process unless TensorFlow is loaded already (learner_weights).
"""

from __future__ import annotations

import dataclasses
import sys

import numpy as np

from distributed_ac.config.schema import Config
from distributed_ac.core.batch import Batch, Weights
from distributed_ac.core.processes import run_in_child
from distributed_ac.envs.space import EnvSpace
from distributed_ac.models import spec as names
from distributed_ac.models.spec import ModelSpec


def random_weights(cfg: Config, space: EnvSpace, version: int = 1) -> Weights:
    """A Weights bundle with the parts the learner publishes for this config and space: an
    MLP's made here with NumPy; a CNN encoder's or a recurrent core's is what a fresh
    Learner publishes (learner_weights), so the bundle cannot drift from the Keras parts'
    order and shapes."""
    spec = ModelSpec.of(cfg, space)
    if spec.encoder != "mlp" or spec.recurrent:
        return with_version(learner_weights(cfg, space), version)
    rng = np.random.default_rng(cfg.seed)

    def dense(sizes):
        return [a for n_in, n_out in zip(sizes[:-1], sizes[1:])
                for a in ((rng.standard_normal((n_in, n_out)) / np.sqrt(n_in)).astype(np.float32),
                          np.zeros(n_out, np.float32))]

    features = [space.obs_dim, *cfg.hidden_sizes]
    parts = {names.ACTOR_ENCODER: dense(features),
             names.ACTOR_HEAD: dense([features[-1], space.num_actions]),
             names.TARGET_ENCODER: dense(features), names.TARGET_HEAD: dense([features[-1], 1])}
    if spec.head == "tanh_gaussian":
        parts[names.LOG_STD] = [np.full(space.num_actions, cfg.log_std_init, np.float32)]
    return Weights(version, version, parts)


def with_version(weights: Weights, version: int) -> Weights:
    """The same arrays as a new version (a broadcast's fresh bundle without rebuilding it)."""
    return dataclasses.replace(weights, version=version, target_version=version)


def learner_weights(cfg: Config, space: EnvSpace) -> Weights:
    """Learner(cfg, space).weights(): here if TensorFlow is loaded already, else in a
    fresh process, which keeps TensorFlow (~500 MB, its threads) out of this one and of
    the processes that measure workers."""
    if "tensorflow" in sys.modules:
        return _initial_weights(cfg, space)
    return run_in_child(_initial_weights, cfg, space)


def _initial_weights(cfg: Config, space: EnvSpace) -> Weights:
    from distributed_ac.learning.tf_runtime import load_tensorflow

    load_tensorflow()  # its C++ start-up lines held back (tf_runtime.py)
    from distributed_ac.learning.learner import Learner

    # on the CPU: a bundle is all this needs, and a GPU's memory is the learner phase's
    return Learner(dataclasses.replace(cfg, device="cpu"), space).weights()


def synthetic_batch(space: EnvSpace, T: int, N: int, seed: int = 0) -> Batch:
    """A [T, N] batch with plausible flags: ~1% episode ends, each followed by a masked reset
    step. Observations as the env gives them: [T, N, *obs_shape] of obs_dtype (uint8
    frames for an Atari-style image env, which the learner's graph scales)."""
    rng = np.random.default_rng(seed)
    f32 = np.float32
    done = rng.random((T, N)) < 0.01
    mask = np.ones((T, N), f32)
    mask[1:][done[:-1]] = 0.0
    if space.multi_discrete:
        nvec = np.asarray(space.action_nvec)
        actions = rng.integers(0, nvec, (T, N, len(nvec))).astype(np.int32)
        logp = np.full((T, N), -np.log(nvec).sum(), f32)
    elif space.discrete:
        actions = rng.integers(0, space.num_actions, (T, N)).astype(np.int32)
        logp = np.full((T, N), -np.log(space.num_actions), f32)
    else:
        actions = rng.standard_normal((T, N, space.num_actions)).astype(f32)
        logp = np.full((T, N), -1.0 * space.num_actions, f32)
    return Batch(obs=_synthetic_obs(space, (T, N), rng), actions=actions,
                 rewards=np.ones((T, N), f32), terminated=done.astype(f32),
                 truncated=np.zeros((T, N), f32), mask=mask, behaviour_logp=logp,
                 values=(0.1 * rng.standard_normal((T + 1, N))).astype(f32),
                 policy_version=0, target_version=0,
                 action_mask=np.ones((T, N, space.mask_size), bool) if space.mask_size else None)


def _synthetic_obs(space: EnvSpace, lead: tuple[int, int], rng: np.random.Generator):
    """[*lead] observations: one array, or a mixed space's dict of them."""
    def draw(shape, dtype):
        if dtype == "uint8":
            return rng.integers(0, 256, (*lead, *shape), dtype=np.uint8)
        return rng.standard_normal((*lead, *shape)).astype(np.float32)

    if space.mixed:
        return {k: draw(*array) for k, array in space.obs_arrays().items()}
    return draw(space.obs_shape, space.obs_dtype)
