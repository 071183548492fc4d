"""The worker's copy of the policy: the model's NumPy parts over a Weights bundle.

Rollout workers stay light (no TensorFlow, whose import costs each process hundreds of
MB and seconds), so the parts
the learner trains in Keras are evaluated here by their NumPy twins (models/), of the
kinds the part registry (models/registry.py) picks for the spec, read from the bundle by
part name. Tests hold each twin to its Keras part to 1e-5.
"""

from __future__ import annotations

import numpy as np

from distributed_ac.core.batch import Weights
from distributed_ac.core.normalization import normalize_np
from distributed_ac.core.obs import leading, tree_map
from distributed_ac.envs.space import EnvSpace
from distributed_ac.models import registry
from distributed_ac.models import spec as parts
from distributed_ac.models.heads import MASKED_LOGIT, ValueHead
from distributed_ac.models.spec import IMAGE, VECTOR, ModelSpec

VALUE_BLOCK = 1024  # rows per block of Policy.value


class Policy:
    """Samples actions and computes V_target values from the newest Weights bundle.

    With a recurrent core the policy also owns the cores' state for the sub-envs it acts
    in ({"actor.core": (h, c), "v_target.core": ...}, arrays [N, H]): `reset_state(N)`
    zeroes it, `act` and `values` advance it, and a row is zeroed wherever `starts`
    marks the first step of an episode."""

    def __init__(self, space: EnvSpace, spec: ModelSpec):
        self.space, self.spec = space, spec
        self.encoder = registry.numpy_encoder(spec)
        self.head = registry.numpy_head(spec, space)
        # a centralised critic's V_target reads rows of its own (ModelSpec.critic_spec)
        self.target_encoder = registry.numpy_encoder(spec.critic_spec)
        self.value_head = ValueHead()
        self.cores = ({parts.ACTOR_CORE: registry.numpy_core(spec),
                       parts.TARGET_CORE: registry.numpy_core(spec)}
                      if spec.recurrent else {})
        self.state: dict[str, tuple] = {}
        self.weights: Weights | None = None
        self._obs_norm: tuple[np.ndarray, np.ndarray] | None = None

    def reset_state(self, n: int) -> None:
        """Zero state for n sub-envs (nothing to do without a core)."""
        self.state = {name: core.zero_state(n) for name, core in self.cores.items()}

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
        for name, core in self.cores.items():
            core.load(p[name])
        norm = p.get(parts.OBS_NORM)
        self._obs_norm = None if norm is None else (np.asarray(norm[0], np.float32),
                                                    np.asarray(norm[1], np.float32))

    def _input(self, obs):
        """Observations as both networks take them (normalised with normalize_obs); a
        mixed observation's dict as {IMAGE: the image, VECTOR: the vector entries
        concatenated in the space's order}."""
        if self.spec.mixed:
            vector = np.concatenate([obs[e.name] for e in self.space.obs_entries], axis=-1)
            return {IMAGE: obs[str(self.space.obs_key)], VECTOR: self._normalized(vector)}
        return self._normalized(obs)

    def _normalized(self, x: np.ndarray) -> np.ndarray:
        if self._obs_norm is None:
            return x
        return normalize_np(x, *self._obs_norm, self.spec.obs_clip)

    def value(self, obs, critic: np.ndarray | None = None) -> np.ndarray:
        """V_target(obs) for obs [B, *obs_shape] -> [B], in blocks of VALUE_BLOCK rows
        (a block's activations stay in cache; one pass over 17k rows ran at half speed);
        a centralised critic reads `critic` [B, critic_width] instead, as it comes."""
        rows = leading(obs)[0]
        out = np.empty(rows, np.float32)
        x = self._input(obs) if critic is None else critic
        for i in range(0, rows, VALUE_BLOCK):
            block = tree_map(lambda a: a[i:i + VALUE_BLOCK], x)
            out[i:i + VALUE_BLOCK] = self.value_head(self.target_encoder(block))
        return out

    def rollout_values(self, obs: np.ndarray, starts: np.ndarray,
                       critic: np.ndarray | None = None) -> np.ndarray:
        """V_target over a rollout's T + 1 observations [T + 1, N, ...] (the last is the
        bootstrap), the core unrolled from its state with `starts` [T + 1, N]; the state
        advances by T steps (the bootstrap step is the next rollout's first). [T + 1, N].
        `critic` [T + 1, N, critic_width]: a centralised critic's input (feed-forward)."""
        steps, n = starts.shape
        obs = tree_map(lambda a: a.reshape(steps * n, *a.shape[2:]), obs)
        if not self.cores:
            flat = None if critic is None else critic.reshape(steps * n, -1)
            return self.value(obs, flat).reshape(steps, n)
        x, rows = self._input(obs), steps * n
        features = None
        for i in range(0, rows, VALUE_BLOCK):  # the encoder returns a reused buffer: copy
            block = self.target_encoder(tree_map(lambda a: a[i:i + VALUE_BLOCK], x))
            if features is None:
                features = np.empty((rows, block.shape[1]), np.float32)
            features[i:i + len(block)] = block
        features = features.reshape(steps, n, -1)
        core, state, outs = self.cores[parts.TARGET_CORE], self.state[parts.TARGET_CORE], []
        for t in range(steps):
            out, new = core.step(features[t], state, starts[t])
            outs.append(out)
            if t < steps - 1:
                state = new
        self.state[parts.TARGET_CORE] = state
        return self.value_head(np.concatenate(outs)).reshape(steps, n)

    def _actor_features(self, obs: np.ndarray, starts: np.ndarray | None) -> np.ndarray:
        x = self.encoder(self._input(obs))
        if self.cores:
            x, self.state[parts.ACTOR_CORE] = self.cores[parts.ACTOR_CORE].step(
                x, self.state[parts.ACTOR_CORE], starts)
        return x

    def forward(self, obs: np.ndarray, starts: np.ndarray | None = None) -> np.ndarray:
        """The action head's output: logits [B, K] (Discrete) or the Gaussian mean of u
        [B, A] (Box). A fresh array; act() reads the reused buffer directly. A recurrent
        policy's state advances one step."""
        return self.head(self._actor_features(obs, starts)).copy()

    def act(self, obs: np.ndarray, rng: np.random.Generator | None, deterministic: bool = False,
            starts: np.ndarray | None = None, legal: np.ndarray | None = None,
            noise: np.ndarray | None = None):
        """Sample actions for obs [B, *obs_shape] (EnvSpace.as_batch); `starts` [B] marks
        the sub-envs whose episode begins at this step (a recurrent policy zeroes their
        state first); `legal` [B, num_actions] bool, the action masks: a masked action
        has probability exactly 0. `noise` [B, num_actions]: the sampling draws made
        beforehand (head.noise_kind), in place of drawing from `rng`.

        Returns (stored, env_action, logp): `stored` is what the learner re-scores (the
        Discrete index, or the pre-squash Gaussian sample u for Box), `env_action` is what
        the env receives, `logp` is log pi(stored | obs) including the tanh Jacobian.
        """
        out = self.head(self._actor_features(obs, starts))  # a reused buffer: only read
        if legal is not None:
            out = np.where(legal, out, MASKED_LOGIT)
        stored, logp = self.head.sample(out, rng, deterministic, noise)
        return stored, self.head.env_action(stored), logp

    def rows_without_choice(self, legal: np.ndarray) -> np.ndarray:
        """The rows of action masks [B, num_actions] in which some component (the only
        one for Discrete) allows nothing: no action can be sampled there."""
        allowed = np.add.reduceat(legal, self.head.mask_bounds, axis=1) > 0
        return np.flatnonzero(~allowed.all(axis=1))

    def env_action(self, stored: np.ndarray) -> np.ndarray:
        """What the env receives for a stored action."""
        return self.head.env_action(stored)
