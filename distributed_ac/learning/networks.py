"""Keras builders for the actor, the critic V and its exact copy V_target. No losses here.

Two topologies:
- separate: actor and critic are physically separate MLPs (no variable in common);
- shared:   one trunk of Dense layers feeds both a policy head and a value head. The
            trunk's variables are the very same objects in both paths (tests check it).

Every network is a chain of layers, and `Networks.*_path` lists them from observation to
output, which is how Weights bundles are laid out for the NumPy policy: Dense layers
(MLP torso), or one CNN torso layer (keras_cnn.py, image observations) then the head.
V_target always has its own variables (its own trunk copy too): it is V, frozen between
syncs. With normalize_obs, all three read observations through one ObsNormalizer (the
running statistics; the Keras models themselves take normalised input).
"""

from __future__ import annotations

import dataclasses

import keras
import numpy as np
import tensorflow as tf

from distributed_ac.config.schema import Config, obs_normalized, torso_for
from distributed_ac.core import normalization
from distributed_ac.envs.vector import EnvSpace
from distributed_ac.models import keras_cnn


class LogStd(keras.layers.Layer):
    """State-independent log standard deviation of the Gaussian over u (pre-tanh)."""

    def __init__(self, dim: int, init: float = 0.0, **kwargs):
        super().__init__(**kwargs)
        self.dim, self.init = dim, init
        self.log_std = self.add_weight(name="log_std", shape=(dim,),
                                       initializer=keras.initializers.Constant(init))

    def call(self, mean):
        return tf.zeros_like(mean) + self.log_std

    def get_config(self):
        return {**super().get_config(), "dim": self.dim, "init": self.init}


class RunningMoments(tf.Module):
    """count, mean and var of a stream of [B, dim] samples, as float64 tf.Variables
    (checkpointed with the networks). Starts at mean 0, var 1 and count 0: normalising
    before any data changes nothing."""

    def __init__(self, dim: int, name: str):
        super().__init__(name=name)
        f64 = tf.float64
        self.count = tf.Variable(tf.zeros([], f64), trainable=False, name="count")
        self.mean = tf.Variable(tf.zeros([dim], f64), trainable=False, name="mean")
        self.var = tf.Variable(tf.ones([dim], f64), trainable=False, name="var")

    def merge(self, n_b, mean_b, var_b) -> None:
        """Fold a batch's moments in (graph ops; a batch of count 0 changes nothing)."""
        n_b, mean_b, var_b = (tf.cast(t, tf.float64) for t in (n_b, mean_b, var_b))
        n, mean, var = normalization.chan_merge(self.count, self.mean, self.var, n_b, mean_b, var_b)
        keep = n_b > 0
        self.count.assign(tf.where(keep, n, self.count))
        self.mean.assign(tf.where(keep, mean, self.mean))
        self.var.assign(tf.where(keep, var, self.var))

    def merge_samples(self, x, keep=None) -> None:
        """Fold in the moments of x [B, dim], of its rows where `keep` [B] is true if given."""
        if keep is not None:
            x = tf.boolean_mask(x, keep)
        x = tf.cast(x, tf.float64)
        n = tf.cast(tf.shape(x)[0], tf.float64)
        mean, var = tf.nn.moments(x, axes=[0])  # NaN for no rows: merge() ignores count 0
        self.merge(n, tf.where(n > 0, mean, 0.0), tf.where(n > 0, var, 1.0))

    def inv_std(self):
        return tf.cast(tf.math.rsqrt(self.var + normalization.EPS), tf.float32)


class ObsNormalizer(RunningMoments):
    """The observation statistics and their use (normalization.py says how and why)."""

    def __init__(self, dim: int, clip: float):
        super().__init__(dim, name="obs_norm")
        self.clip = clip

    def __call__(self, obs):
        mean = tf.cast(self.mean, tf.float32)
        return tf.clip_by_value((obs - mean) * self.inv_std(), -self.clip, self.clip)

    def numpy_params(self) -> tuple[np.ndarray, np.ndarray]:
        """(mean, 1 / std) as float32, what the NumPy policy and an export apply."""
        return (self.mean.numpy().astype(np.float32),
                (1.0 / np.sqrt(self.var.numpy() + normalization.EPS)).astype(np.float32))



@dataclasses.dataclass
class Networks:
    actor: keras.Model  # obs -> logits, or [mean, log_std]
    critic: keras.Model  # obs -> V(obs) [B, 1]
    v_target: keras.Model  # obs -> V_target(obs) [B, 1], same architecture as critic
    actor_path: list  # layers obs -> actor output (trunk first when shared)
    critic_path: list  # layers obs -> V
    target_path: list  # layers obs -> V_target
    log_std: LogStd | None
    shared_trunk: list  # the trunk's layers (empty when separate)
    obs_norm: ObsNormalizer | None = None  # running observation statistics (normalize_obs)
    torso: str = "mlp"  # mlp, nature or impala: how the paths begin

    @property
    def actor_variables(self) -> list:
        """What the actor optimizer updates: the actor path (trunk included when shared)."""
        extra = [self.log_std.log_std] if self.log_std is not None else []
        return [v for layer in self.actor_path for v in layer.trainable_variables] + extra

    def actor_and_value(self, obs):
        """The actor's output and V(obs) [B, 1] from one pass over the trunk. In the shared
        topology calling `actor` and then `critic` would run the trunk (a CNN, for pixels)
        twice forward and twice backward; here both heads read the one set of features.
        The gradients are the same: the trunk's is the sum of what each head sends back."""
        if not self.shared_trunk:
            return self.actor(obs), self.critic(obs)
        features = _chain(obs, self.shared_trunk)
        pi = self.actor_path[-1](features)
        if self.log_std is not None:
            pi = [pi, self.log_std(pi)]
        return pi, self.critic_path[-1](features)

    @property
    def critic_variables(self) -> list:
        """What the critic optimizer updates: the critic path minus any shared trunk."""
        trunk = {id(v) for layer in self.shared_trunk for v in layer.trainable_variables}
        return [v for layer in self.critic_path for v in layer.trainable_variables
                if id(v) not in trunk]


def _dense_stack(cfg: Config, prefix: str, seed: int) -> list:
    init = keras.initializers.Orthogonal
    return [keras.layers.Dense(h, activation=cfg.activation, name=f"{prefix}_{i}",
                               kernel_initializer=init(gain=2 ** 0.5, seed=seed + i))
            for i, h in enumerate(cfg.hidden_sizes)]


def _trunk(cfg: Config, torso: str, prefix: str, seed: int) -> list:
    """A network's layers before its head: Dense layers, or one CNN torso layer."""
    if torso == "mlp":
        return _dense_stack(cfg, prefix, seed)
    return [keras_cnn.make_torso(torso, f"{prefix}_{torso}", seed, cfg.cnn_precision)]


def _head(units: int, name: str, gain: float, seed: int):
    # Small init on the policy head keeps the initial policy close to uniform (cleanRL).
    return keras.layers.Dense(units, activation=None, name=name,
                              kernel_initializer=keras.initializers.Orthogonal(gain=gain, seed=seed))


def _chain(inp, layers):
    x = inp
    for layer in layers:
        x = layer(x)
    return x


def build_networks(cfg: Config, space: EnvSpace) -> Networks:
    """Build actor, critic and V_target for `space`; V_target starts equal to V."""
    s = cfg.seed * 1000
    torso = torso_for(cfg, space.obs_shape)
    inp = keras.Input(shape=space.obs_shape, dtype=space.obs_dtype, name="obs")
    shared_topology = cfg.topology == "shared"
    critic_trunk = _trunk(cfg, torso, "trunk" if shared_topology else "critic", s + 100)
    if shared_topology:
        actor_trunk = shared = critic_trunk
    else:
        actor_trunk, shared = _trunk(cfg, torso, "actor", s), []
    pi_head = _head(space.num_actions, "pi_head", 0.01, s + 200)
    v_head = _head(1, "v_head", 1.0, s + 300)
    actor_path, critic_path = actor_trunk + [pi_head], critic_trunk + [v_head]
    pi_out = _chain(inp, actor_path)
    log_std = None
    if not space.discrete:
        log_std = LogStd(space.num_actions, cfg.log_std_init, name="log_std")
        pi_out = [pi_out, log_std(pi_out)]
    actor = keras.Model(inp, pi_out, name="actor")
    critic = keras.Model(inp, _chain(inp, critic_path), name="critic")

    target_path = _trunk(cfg, torso, "target", s + 400) + [_head(1, "target_v_head", 1.0, s + 500)]
    t_inp = keras.Input(shape=space.obs_shape, dtype=space.obs_dtype, name="obs")
    v_target = keras.Model(t_inp, _chain(t_inp, target_path), name="v_target")
    v_target.trainable = False
    obs_norm = (ObsNormalizer(space.obs_dim, cfg.obs_clip) if obs_normalized(cfg, space.obs_shape)
                else None)
    nets = Networks(actor, critic, v_target, actor_path, critic_path, target_path, log_std, shared,
                    obs_norm, torso)
    sync_target(nets, 1.0)
    return nets


def path_variables(path: list) -> list:
    """[kernel0, bias0, kernel1, bias1, ...] along a path (the Weights layout); a CNN
    torso contributes its arrays in keras_cnn.py's bundle order."""
    return [v for layer in path
            for v in getattr(layer, "bundle_variables", None) or (layer.kernel, layer.bias)]


def actor_bundle_variables(nets: Networks) -> list:
    """The actor's part of a Weights bundle, in its one layout: the actor path's kernels
    and biases, then (Box actions) the state-independent log_std."""
    extra = [nets.log_std.log_std] if nets.log_std is not None else []
    return path_variables(nets.actor_path) + extra


def sync_target(nets: Networks, tau: float) -> None:
    """V_target <- tau * V + (1 - tau) * V_target; tau = 1 is an exact copy."""
    for t, v in zip(path_variables(nets.target_path), path_variables(nets.critic_path)):
        if tau == 1.0:
            t.assign(v)
        else:
            t.assign(tau * v + (1.0 - tau) * t)
