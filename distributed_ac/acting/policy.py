"""The worker's copy of the policy: the model's NumPy parts over a Weights bundle.

Rollout workers stay light (no TensorFlow, whose import costs each process hundreds of
MB and seconds), so the parts
the learner trains in Keras are evaluated here by their NumPy twins (models/), read
from the bundle by part name. Tests hold each twin to its Keras part to 1e-5.
"""

from __future__ import annotations

import numpy as np

from distributed_ac.core.batch import Weights
from distributed_ac.core.normalization import normalize_np
from distributed_ac.envs.vector import EnvSpace
from distributed_ac.models import spec as parts
from distributed_ac.models.cnn import CNNEncoder
from distributed_ac.models.heads import ValueHead, action_head
from distributed_ac.models.mlp import MLPEncoder
from distributed_ac.models.spec import ModelSpec

VALUE_BLOCK = 1024  # rows per block of Policy.value


def numpy_encoder(spec: ModelSpec):
    return MLPEncoder(spec.activation) if spec.encoder == "mlp" else CNNEncoder(spec.encoder)


class Policy:
    """Samples actions and computes V_target values from the newest Weights bundle."""

    def __init__(self, space: EnvSpace, spec: ModelSpec):
        self.space, self.spec = space, spec
        self.encoder, self.head = numpy_encoder(spec), action_head(spec, space)
        self.target_encoder, self.value_head = numpy_encoder(spec), ValueHead()
        self.weights: Weights | None = None
        self._obs_norm: tuple[np.ndarray, np.ndarray] | None = None

    def load(self, weights: Weights) -> None:
        if self.weights is not None and (weights.version, weights.target_version) == (
                self.weights.version, self.weights.target_version):
            return
        self.weights = weights
        p = weights.parts
        self.encoder.load(p[parts.ACTOR_ENCODER])
        self.head.load(p, "actor")
        self.target_encoder.load(p[parts.TARGET_ENCODER])
        self.value_head.load(p, "v_target")
        norm = p.get(parts.OBS_NORM)
        self._obs_norm = None if norm is None else (np.asarray(norm[0], np.float32),
                                                    np.asarray(norm[1], np.float32))

    def _input(self, obs: np.ndarray) -> np.ndarray:
        """Observations as both networks take them (normalised with normalize_obs)."""
        if self._obs_norm is None:
            return obs
        return normalize_np(obs, *self._obs_norm, self.spec.obs_clip)

    def value(self, obs: np.ndarray) -> np.ndarray:
        """V_target(obs) for obs [B, *obs_shape] -> [B], in blocks of VALUE_BLOCK rows
        (a block's activations stay in cache; one pass over 17k rows ran at half speed)."""
        out = np.empty(len(obs), np.float32)
        obs = self._input(obs)
        for i in range(0, len(obs), VALUE_BLOCK):
            out[i:i + VALUE_BLOCK] = self.value_head(self.target_encoder(obs[i:i + VALUE_BLOCK]))
        return out

    def forward(self, obs: np.ndarray) -> np.ndarray:
        """The action head's output: logits [B, K] (Discrete) or the Gaussian mean of u
        [B, A] (Box). A fresh array; act() reads the reused buffer directly."""
        return self.head(self.encoder(self._input(obs))).copy()

    def act(self, obs: np.ndarray, rng: np.random.Generator, deterministic: bool = False):
        """Sample actions for obs [B, *obs_shape] (EnvSpace.as_batch).

        Returns (stored, env_action, logp): `stored` is what the learner re-scores (the
        Discrete index, or the pre-squash Gaussian sample u for Box), `env_action` is what
        the env receives, `logp` is log pi(stored | obs) including the tanh Jacobian.
        """
        out = self.head(self.encoder(self._input(obs)))  # a reused buffer: only read
        stored, logp = self.head.sample(out, rng, deterministic)
        return stored, self.head.env_action(stored), logp

    def env_action(self, stored: np.ndarray) -> np.ndarray:
        """What the env receives for a stored action."""
        return self.head.env_action(stored)
