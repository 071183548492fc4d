"""`dac export`: a standalone TensorFlow SavedModel of a trained policy.

    m = tf.saved_model.load(DIR)      # TensorFlow only: no distributed_ac, no Keras objects
    m.action(obs)   # obs [B, obs_dim] float32 -> [B] int64 (Discrete) or [B, A] float32 (Box)
    m.value(obs)    # obs [B, obs_dim] float32 -> [B] float32, the critic V(obs)

A Dict (or Tuple) observation of vector entries is taken as a dict keyed by the
entries' keys (a Tuple's by "0", "1", ...): a Box entry flattened to float32 [B, size],
a Discrete entry as int64 [B], a MultiBinary entry as float32 [B, size]. An image entry
beside them comes as the env gives it, e.g. uint8 [B, H, W, C].

MultiDiscrete (and MultiBinary) actions come as [B, components] int32. An env whose
Dict observation has an action_mask takes the observation's other key as `obs` and the
mask as a second argument, float32 [B, num_actions] (1 = allowed); a masked action is
never chosen:

    m.action(obs, action_mask)

A recurrent policy (`--core lstm` or `gru`) also takes and returns its core's state,
one float32 [B, S] array (the LSTM's h and c side by side, the GRU's h):

    state = m.initial_state(tf.constant(B))     # zeros: the first step of an episode
    action, state = m.action(obs, state)        # carry state to the next step
    value, value_state = m.value(obs, value_state)   # the critic keeps its own

A centralised critic (critic_input state or joint) reads what the env's info gave it,
not the observation: `m.value(critic_obs)`, float32 [B, critic_width] (envs/central.py);
`m.action` still takes the agent's own observation alone.

and a sub-env whose episode ends starts the next one from zeros again.

An image policy (a CNN torso) takes observations as the env gives them, e.g. uint8
[B, 84, 84, 4] for Atari, and scales them by 1/255 inside, as training did. A frame the
run resized (envs/reading.py: frames over 128 px, or --frame-size) comes at the size it
trained on; a grid the run read as categories comes as the env's codes, uint8
[B, H, W, C] (the whole observation, or its Dict entry), and is one-hot inside.

Actions are deterministic: the argmax of the logits (plus the Discrete space's start),
or the Gaussian mean squashed by tanh and rescaled to the Box, exactly as the workers'
policy acts with `deterministic=True`. Observations go in raw: a run trained with
normalize_obs has its statistics baked in. The networks are saved as plain variables with
a tf.function forward pass, so serving depends on nothing but TensorFlow; the same two
functions are the SavedModel's signatures `serving_default` (action) and `value`.

Each part's forward pass is the plain-TF function its Keras layer's call() runs on the
learner, of the kind models/registry.py picks for the run (as it does for the learner
and the workers), here over the copied arrays; the observations reach the encoder as
the learner's own (learning/inputs.py) and the action is networks.greedy_action's.
"""

from __future__ import annotations

from pathlib import Path

import tensorflow as tf

from distributed_ac.core.errors import UsageError
from distributed_ac.envs.reading import CATEGORIES
from distributed_ac.envs.space import EnvSpace
from distributed_ac.envs.vector import category_grid
from distributed_ac.learning import inputs
from distributed_ac.learning.networks import greedy_action
from distributed_ac.learning.normalizers import normalize_tf
from distributed_ac.models import registry
from distributed_ac.models import spec as names
from distributed_ac.models.cores import state_size
from distributed_ac.models.keras_heads import tf_linear


def _copy(nets, part_names) -> dict[str, list]:
    """Each part's arrays as new, untrainable variables: the SavedModel holds no Keras object."""
    return {n: [tf.Variable(v.numpy(), trainable=False) for v in vs]
            for n, vs in nets.bundle(part_names).items()}


def _encoder_forward(spec):
    """The encoder's plain-TF forward over copied arrays, its TF module's forward_of(spec);
    a user's module without one cannot be exported, which is said in one line."""
    kind = registry.encoder_of(spec)
    module = registry.keras_module(kind)
    if not callable(getattr(module, "forward_of", None)):
        raise UsageError(f"torso {spec.encoder}: {kind.keras} has no forward_of(spec), the "
                         "plain-TF forward over the part's arrays an export runs; add one "
                         "to export this run")
    return module.forward_of(spec)


class PolicyModule(tf.Module):
    """The actor's and the critic's parts, by name, with a plain-TF forward pass per part."""

    def __init__(self, nets, space: EnvSpace, grid: tuple | None = None):
        """`grid`: (its Dict key or None, its [H, W, C]) of a grid read as categories."""
        super().__init__(name="policy")
        self.spec, self._space, self._grid = nets.spec, space, grid
        recurrent = self.spec.recurrent
        # the forward passes the learner's Keras layers run, of the kinds the registry
        # picks for this spec (as it picks the learner's and the workers')
        self._encode = _encoder_forward(self.spec)
        self._step = (registry.keras_module(registry.core_of(self.spec)).step_of(self.spec)
                      if recurrent else None)
        core = (names.ACTOR_CORE,) if recurrent else ()
        self.actor_parts = _copy(nets, (names.ACTOR_ENCODER, *core, names.ACTOR_HEAD))
        # the shared topology's critic reads the actor's encoder (and core): one copy of it
        shared = (names.ACTOR_ENCODER, *core)
        own = (names.CRITIC_ENCODER, *((names.CRITIC_CORE,) if recurrent else ()))
        self.critic_parts = {names.CRITIC_HEAD: _copy(nets, (names.CRITIC_HEAD,))[names.CRITIC_HEAD]}
        if self.spec.shared:
            self.critic_parts.update(zip(own, (self.actor_parts[n] for n in shared)))
        else:
            self.critic_parts.update(_copy(nets, own))
        # normalize_obs: the statistics as constants of the graph, so it takes raw observations
        self._norm = None if nets.obs_norm is None else (
            *(tf.constant(a) for a in nets.obs_norm.numpy_params()), nets.obs_norm.clip)
        image = tf.TensorSpec([None, *space.obs_shape], tf.as_dtype(space.obs_dtype),
                              name=str(space.obs_key) if space.mixed else "obs")
        obs = ({str(space.obs_key): image, **_entry_specs(space.obs_entries)} if space.mixed
               else _entry_specs(space.obs_entries) if space.obs_entries else image)
        if grid is not None:  # the grid's codes as the env gives them
            codes = tf.TensorSpec([None, *grid[1]], tf.uint8, name=_name(grid[0]))
            obs = codes if grid[0] is None else {**obs, _name(grid[0]): codes}
        # an action mask (1 = allowed) as float32, whatever integer or bool type the env used
        mask = ([tf.TensorSpec([None, space.mask_size], tf.float32, name="action_mask")]
                if space.mask_size else [])
        if recurrent:
            width = state_size(self.spec.core) * self.spec.core_size
            state = [tf.TensorSpec([None, width], tf.float32, name="state")]
            self.initial_state = tf.function(
                lambda batch: tf.zeros([batch, width]),
                input_signature=[tf.TensorSpec([], tf.int32, name="batch")])
        else:
            state = []
        self.action = tf.function(self._action, input_signature=[obs, *mask, *state])
        if space.critic_width:  # the critic reads its own rows (no core: refused by Config)
            self._encode_critic = _encoder_forward(self.spec.critic_spec)
            critic_obs = tf.TensorSpec([None, space.critic_width], tf.float32, name="critic_obs")
            self.value = tf.function(self._central_value, input_signature=[critic_obs])
        else:
            self.value = tf.function(self._value, input_signature=[obs, *state])

    def _input(self, obs):
        """The served observations as the encoders read them: the entries as a batch holds
        them, then normalised and arranged as the learner's step does."""
        norm = None if self._norm is None else (lambda x: normalize_tf(x, *self._norm))
        if self._grid is not None:
            obs = _one_hot_grid(obs, self._grid[0])
        return inputs.network_obs(self._space, norm, _batch_form(obs, self._space))

    def _features(self, parts: dict, network: str, obs, state):
        x = self._encode(parts[f"{network}.encoder"], self._input(obs))
        if state is None:
            return x, None
        k = state_size(self.spec.core)
        x, new = self._step(parts[f"{network}.core"], x, tuple(tf.split(state, k, axis=-1)))
        return x, tf.concat(new, axis=-1)

    def _action(self, obs, *rest):
        """obs[, action_mask][, state] -> action[, state]."""
        state = rest[-1] if self.spec.recurrent else None
        features, state = self._features(self.actor_parts, "actor", obs, state)
        out = tf_linear(self.actor_parts[names.ACTOR_HEAD], features)
        legal = rest[0] > 0 if self._space.mask_size else None
        action = greedy_action(self.spec, self._space, out, legal)
        return action if state is None else (action, state)

    def _value(self, obs, state=None):
        p = self.critic_parts
        features, state = self._features(p, "critic", obs, state)
        value = tf_linear(p[names.CRITIC_HEAD], features)[:, 0]
        return value if state is None else (value, state)

    def _central_value(self, critic_obs):
        p = self.critic_parts
        features = self._encode_critic(p[names.CRITIC_ENCODER], critic_obs)
        return tf_linear(p[names.CRITIC_HEAD], features)[:, 0]


def _name(key) -> str:
    return "obs" if key is None else str(key)


def _one_hot_grid(obs, key):
    """reading.CategoryGrid in TF: the grid's codes [B, H, W, C] as float32
    [B, H x W x C x CATEGORIES] of 0 and 1, in CategoryGrid's order."""
    codes = obs if key is None else obs[_name(key)]
    hot = tf.one_hot(tf.minimum(tf.cast(codes, tf.int32), CATEGORIES - 1), CATEGORIES)
    flat = tf.reshape(hot, [tf.shape(codes)[0], -1])
    return flat if key is None else {**obs, _name(key): flat}


def _entry_spec(e) -> tf.TensorSpec:
    """One vector entry as the SavedModel takes it, batched: a Discrete as int64 [B], a
    MultiDiscrete as int64 [B, components], text as its bag of words float32 [B, buckets]
    (envs/structured.bag_of_words), a Box flattened or a MultiBinary as float32 [B, size]."""
    if e.kind == "discrete":
        return tf.TensorSpec([None], tf.int64, name=e.name)
    if e.kind == "multi_discrete":
        return tf.TensorSpec([None, len(e.nvec)], tf.int64, name=e.name)
    return tf.TensorSpec([None, e.size], tf.float32, name=e.name)


def _entry_specs(entries):
    """The entries as named inputs; a bare Discrete, MultiDiscrete or MultiBinary
    observation (one entry, key None) as the one input `obs`."""
    if entries[0].key is None:
        return _entry_spec(entries[0])
    return {e.name: _entry_spec(e) for e in entries}


def _entry_tf(x, e):
    """envs/structured.as_float in TF: an index one-hot, other entries as they come."""
    if e.kind == "discrete":
        return tf.one_hot(x - e.start, e.size)
    if e.kind == "multi_discrete":
        return tf.concat([tf.one_hot(x[:, i] - start, n)
                          for i, (n, start) in enumerate(zip(e.nvec, e.starts))], axis=1)
    return x


def _as_vector_tf(obs, entries):
    """envs/structured.as_vector in TF: the entries as floats, concatenated."""
    if entries[0].key is None:
        return _entry_tf(obs, entries[0])
    return tf.concat([_entry_tf(obs[e.name], e) for e in entries], axis=1)


def _batch_form(obs, space: EnvSpace):
    """Served observations as a Batch holds them (EnvSpace.obs_arrays): a mixed one's image
    and each vector entry as floats, keyed as there; other entries as one vector."""
    if space.mixed:
        return {str(space.obs_key): obs[str(space.obs_key)],
                **{e.name: _entry_tf(obs[e.name], e) for e in space.obs_entries}}
    return _as_vector_tf(obs, space.obs_entries) if space.obs_entries else obs


def export(run_dir: str | Path, out: str | Path, best: bool = False,
           policy: str | None = None, checkpoint: int | None = None) -> dict:
    """Write the newest checkpoint's policy and value function (with `best`: the best
    evaluation's during training) as a SavedModel at `out`; with separate policies, the
    one named `policy`."""
    from distributed_ac.trained.load import load_trained

    out = Path(out)
    if out.exists() and (not out.is_dir() or (any(out.iterdir())
                                              and not (out / "saved_model.pb").exists())):
        raise UsageError(f"--out {out} exists and holds something other than a SavedModel; "
                          "choose an empty or new directory")
    cfg, space, learner, path = load_trained(run_dir, best, checkpoint)
    module = PolicyModule(_chosen(learner.nets, policy), space, category_grid(cfg))
    tf.saved_model.save(module, str(out), signatures=_signatures(module))
    return {"checkpoint": path, "saved_model": str(out), "env": cfg.env,
            "obs_dim": space.obs_dim, "obs_shape": list(space.obs_shape),
            "obs_dtype": space.obs_dtype, "action": space.action_kind,
            "num_actions": space.num_actions, "action_mask": space.mask_size > 0,
            "core": learner.spec.core, **({"policy": policy} if policy else {})}


def _chosen(nets, policy: str | None):
    """The networks of the policy to export: the run's only ones, or `policy`'s."""
    by_policy = getattr(nets, "by_policy", None)
    if by_policy is None:
        if policy is not None:
            raise UsageError(f"--policy {policy}: this run trained one policy (no policy_mapping)")
        return nets
    if policy not in by_policy:
        raise UsageError(f"--policy: this run has separate policies, name one of "
                         f"{', '.join(by_policy)}" + (f" (not '{policy}')" if policy else ""))
    return by_policy[policy]


def _signatures(module: PolicyModule) -> dict:
    """serving_default (action) and value, as dicts of named outputs."""
    if not module.spec.recurrent:
        return {"serving_default": tf.function(lambda *x: {"action": module.action(*x)},
                                               input_signature=module.action.input_signature),
                "value": tf.function(lambda x: {"value": module.value(x)},
                                     input_signature=module.value.input_signature)}

    def named(fn, output):
        return lambda *x: dict(zip((output, "state"), fn(*x)))

    return {"serving_default": tf.function(named(module.action, "action"),
                                           input_signature=module.action.input_signature),
            "value": tf.function(named(module.value, "value"),
                                 input_signature=module.value.input_signature)}
