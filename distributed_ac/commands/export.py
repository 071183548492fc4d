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

import keras
import tensorflow as tf

from distributed_ac.envs.vector import EnvSpace
from distributed_ac.learning.distributions import squash_to_box
from distributed_ac.learning.networks import path_variables
from distributed_ac.models import keras_cnn
from distributed_ac.models.cnn import bundle_size
from distributed_ac.run.rundir import RunDirError


class PolicyModule(tf.Module):
    def __init__(self, nets, space: EnvSpace, activation: str):
        super().__init__(name="policy")
        copy = lambda layers: [tf.Variable(v.numpy(), trainable=False)  # noqa: E731
                               for v in path_variables(layers)]
        self.actor_params, self.critic_params = copy(nets.actor_path), copy(nets.critic_path)
        # normalize_obs: the statistics as constants of the graph, so it takes raw observations
        self._norm = None if nets.obs_norm is None else (
            *(tf.constant(a) for a in nets.obs_norm.numpy_params()), nets.obs_norm.clip)
        self._activation = keras.activations.get(activation)  # traced into plain TF ops
        self._space, self._torso = space, nets.torso
        obs = tf.TensorSpec([None, *space.obs_shape], tf.as_dtype(space.obs_dtype), name="obs")
        self.action = tf.function(self._action, input_signature=[obs])
        self.value = tf.function(self._value, input_signature=[obs])

    def _mlp(self, params, x):
        if self._torso != "mlp":  # the CNN's arrays come first (the Weights layout)
            k = bundle_size(self._torso)
            params, x = params[k:], keras_cnn.tf_forward(self._torso, params[:k], x)
        n = len(params) // 2
        for i in range(n):
            x = tf.matmul(x, params[2 * i]) + params[2 * i + 1]
            if i < n - 1:
                x = self._activation(x)
        return x

    def _input(self, obs):
        if self._norm is None:
            return obs
        mean, inv_std, clip = self._norm
        return tf.clip_by_value((obs - mean) * inv_std, -clip, clip)

    def _action(self, obs):
        out = self._mlp(self.actor_params, self._input(obs))
        s = self._space
        if s.discrete:
            return tf.argmax(out, axis=-1) + s.action_start
        return squash_to_box(out, tf.constant(s.action_low, tf.float32),
                             tf.constant(s.action_high, tf.float32))

    def _value(self, obs):
        return self._mlp(self.critic_params, self._input(obs))[:, 0]


def export(run_dir: str | Path, out: str | Path) -> dict:
    """Write the newest checkpoint's policy and value function as a SavedModel at `out`."""
    from distributed_ac.commands.evaluate import load_trained

    out = Path(out)
    if out.exists() and (not out.is_dir() or (any(out.iterdir())
                                              and not (out / "saved_model.pb").exists())):
        raise RunDirError(f"{out} exists and holds something other than a SavedModel; "
                          "choose an empty or new directory")
    cfg, space, learner, path = load_trained(run_dir)
    module = PolicyModule(learner.nets, space, cfg.activation)
    signatures = {"serving_default": tf.function(lambda obs: {"action": module.action(obs)},
                                                 input_signature=module.action.input_signature),
                  "value": tf.function(lambda obs: {"value": module.value(obs)},
                                       input_signature=module.value.input_signature)}
    tf.saved_model.save(module, str(out), signatures=signatures)
    return {"checkpoint": path, "saved_model": str(out), "env": cfg.env,
            "obs_dim": space.obs_dim, "obs_shape": list(space.obs_shape),
            "obs_dtype": space.obs_dtype, "action": "discrete" if space.discrete else "box",
            "num_actions": space.num_actions}
