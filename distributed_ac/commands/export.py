"""`dac export`: a standalone TensorFlow SavedModel of a trained policy.

    m = tf.saved_model.load(DIR)      # TensorFlow only: no distributed_ac, no Keras objects
    m.action(obs)   # obs [B, obs_dim] float32 -> [B] int64 (Discrete) or [B, A] float32 (Box)
    m.value(obs)    # obs [B, obs_dim] float32 -> [B] float32, the critic V(obs)

An image policy (a CNN torso) takes observations as the env gives them, e.g. uint8
[B, 84, 84, 4] for Atari, and scales them by 1/255 inside, as training did.

Actions are deterministic: the argmax of the logits (plus the Discrete space's start),
or the Gaussian mean squashed by tanh and rescaled to the Box, exactly as the workers'
policy acts with `deterministic=True`. Observations go in raw: a run trained with
normalize_obs has its statistics baked in. The networks are saved as plain variables with
a tf.function forward pass, so serving depends on nothing but TensorFlow; the same two
functions are the SavedModel's signatures `serving_default` (action) and `value`.
"""

from __future__ import annotations

from pathlib import Path

import tensorflow as tf

from distributed_ac.core.errors import UsageError
from distributed_ac.envs.vector import EnvSpace
from distributed_ac.learning.distributions import squash_to_box
from distributed_ac.learning.networks import normalize_tf
from distributed_ac.models import keras_cnn, keras_heads, keras_mlp
from distributed_ac.models import spec as names
from distributed_ac.models.spec import ModelSpec


def _copy(nets, part_names) -> dict[str, list]:
    """Each part's arrays as new, untrainable variables: the SavedModel holds no Keras object."""
    return {n: [tf.Variable(v.numpy(), trainable=False) for v in vs]
            for n, vs in nets.bundle(part_names).items()}


def _encoder_tf(spec: ModelSpec, arrays: list, x):
    if spec.encoder == "mlp":
        return keras_mlp.tf_forward(arrays, x, spec.activation)
    return keras_cnn.tf_forward(spec.encoder, arrays, x)


class PolicyModule(tf.Module):
    """The actor's and the critic's parts, by name, with a plain-TF forward pass per part."""

    def __init__(self, nets, space: EnvSpace):
        super().__init__(name="policy")
        self.spec, self._space = nets.spec, space
        self.actor_parts = _copy(nets, (names.ACTOR_ENCODER, names.ACTOR_HEAD))
        # the shared topology's critic reads the actor's encoder: one copy of it
        self.critic_parts = {names.CRITIC_HEAD: _copy(nets, (names.CRITIC_HEAD,))[names.CRITIC_HEAD],
                             names.CRITIC_ENCODER: (self.actor_parts[names.ACTOR_ENCODER]
                                                    if self.spec.shared else
                                                    _copy(nets, (names.CRITIC_ENCODER,))
                                                    [names.CRITIC_ENCODER])}
        # normalize_obs: the statistics as constants of the graph, so it takes raw observations
        self._norm = None if nets.obs_norm is None else (
            *(tf.constant(a) for a in nets.obs_norm.numpy_params()), nets.obs_norm.clip)
        obs = tf.TensorSpec([None, *space.obs_shape], tf.as_dtype(space.obs_dtype), name="obs")
        self.action = tf.function(self._action, input_signature=[obs])
        self.value = tf.function(self._value, input_signature=[obs])

    def _input(self, obs):
        return obs if self._norm is None else normalize_tf(obs, *self._norm)

    def _action(self, obs):
        p = self.actor_parts
        out = keras_heads.tf_linear(p[names.ACTOR_HEAD],
                                    _encoder_tf(self.spec, p[names.ACTOR_ENCODER], self._input(obs)))
        s = self._space
        if s.discrete:
            return tf.argmax(out, axis=-1) + s.action_start
        return squash_to_box(out, tf.constant(s.action_low, tf.float32),
                             tf.constant(s.action_high, tf.float32))

    def _value(self, obs):
        p = self.critic_parts
        features = _encoder_tf(self.spec, p[names.CRITIC_ENCODER], self._input(obs))
        return keras_heads.tf_linear(p[names.CRITIC_HEAD], features)[:, 0]


def export(run_dir: str | Path, out: str | Path) -> dict:
    """Write the newest checkpoint's policy and value function as a SavedModel at `out`."""
    from distributed_ac.commands.evaluate import load_trained

    out = Path(out)
    if out.exists() and (not out.is_dir() or (any(out.iterdir())
                                              and not (out / "saved_model.pb").exists())):
        raise UsageError(f"--out {out} exists and holds something other than a SavedModel; "
                          "choose an empty or new directory")
    cfg, space, learner, path = load_trained(run_dir)
    module = PolicyModule(learner.nets, space)
    signatures = {"serving_default": tf.function(lambda obs: {"action": module.action(obs)},
                                                 input_signature=module.action.input_signature),
                  "value": tf.function(lambda obs: {"value": module.value(obs)},
                                       input_signature=module.value.input_signature)}
    tf.saved_model.save(module, str(out), signatures=signatures)
    return {"checkpoint": path, "saved_model": str(out), "env": cfg.env,
            "obs_dim": space.obs_dim, "obs_shape": list(space.obs_shape),
            "obs_dtype": space.obs_dtype, "action": "discrete" if space.discrete else "box",
            "num_actions": space.num_actions}
