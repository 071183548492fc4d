"""The part registry is where a run's parts are chosen for the learner, the workers and the
export: every kind it names has a NumPy twin computing what its Keras layer computes
(within 1e-5), a Keras layer whose call() is exactly the forward pass an export runs over
copies of its arrays, and the Config's choices are its names."""

import subprocess
import sys
import typing

import numpy as np
import pytest
import tensorflow as tf

from distributed_ac.config.schema import Config, TorsoName
from distributed_ac.envs.space import EnvSpace
from distributed_ac.learning.networks import greedy_action
from distributed_ac.models import registry
from distributed_ac.models.spec import IMAGE, VECTOR, ModelSpec, head_for

RNG = np.random.default_rng(0)
# an input each encoder kind reads, with more rows than one block of the NumPy CNN
IMAGES = {"nature": (36, 36, 2), "impala": (21, 21, 3), "small": (7, 7, 3)}


def spec_of(encoder="mlp", mixed=False, core="none", head="categorical", num_actions=3):
    return ModelSpec(encoder=encoder, hidden_sizes=(32, 16), activation="tanh", head=head,
                     num_actions=num_actions, shared=False, obs_norm=False, obs_clip=10.0,
                     log_std_init=0.0, core=core, core_size=8, mixed=mixed)


def input_for(encoder: str, mixed: bool):
    if encoder not in IMAGES:
        return RNG.normal(size=(40, 5)).astype(np.float32) * 2
    image = RNG.integers(0, 256, (40, *IMAGES[encoder]), dtype=np.uint8)
    if not mixed:
        return image
    return {IMAGE: image, VECTOR: RNG.normal(size=(40, 3)).astype(np.float32)}


def test_the_configs_torso_and_core_choices_are_the_registrys_kinds():
    """Config sits below the models and cannot read the table: this keeps them equal."""
    hints = typing.get_type_hints(Config)
    assert set(typing.get_args(TorsoName)) - {"auto"} == set(registry.SHIPPED)
    assert TorsoName in typing.get_args(hints["torso"])  # beside str: module:attr
    assert set(registry.SHIPPED) <= set(registry.ENCODERS)
    assert set(typing.get_args(hints["core"])) - {"none"} == set(registry.CORES)


def test_reading_the_registry_imports_no_tensorflow():
    code = ("import sys; from distributed_ac.models import registry, spec; "
            "from distributed_ac.acting import numpy_policy; "
            "assert not {'tensorflow', 'keras'} & set(sys.modules), 'TensorFlow imported'")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]


@pytest.mark.parametrize("encoder, mixed", [*((k, False) for k in registry.SHIPPED),
                                            *((k, True) for k in IMAGES)])
def test_each_encoder_kinds_twin_keras_layer_and_export_compute_one_function(encoder, mixed):
    spec = spec_of(encoder, mixed)
    kind = registry.encoder_of(spec)
    assert kind.name == ("mixed" if mixed else encoder)
    layer = registry.keras_module(kind).from_spec(spec, "t", seed=3)
    x = input_for(encoder, mixed)
    want = layer(x).numpy()
    assert np.abs(want).max() > 1e-3  # not a vacuous match
    arrays = [v.numpy() for v in layer.bundle_variables]
    copies = [tf.constant(a) for a in arrays]
    exported = registry.keras_module(kind).forward_of(spec)(copies, tf.nest.map_structure(
        tf.constant, x))
    np.testing.assert_array_equal(exported.numpy(), want)  # the very same forward pass
    twin = registry.numpy_encoder(spec)
    assert isinstance(twin, kind.numpy)
    twin.load(arrays)
    scale = np.abs(want).max()  # float32 sums over many convolutions: error relative to it
    np.testing.assert_allclose(twin(x), want, rtol=1e-5, atol=1e-5 * scale)


@pytest.mark.parametrize("core", registry.CORES)
def test_each_core_kinds_twin_steps_as_the_export_steps(core):
    spec = spec_of(core=core)
    layer = registry.keras_module(registry.core_of(spec)).from_spec(spec, "t", seed=4)
    layer.build((None, 6))
    twin = registry.numpy_core(spec)
    twin.load([v.numpy() for v in layer.bundle_variables])
    x = RNG.normal(size=(10, 6)).astype(np.float32)
    state = tuple(RNG.normal(size=(10, 8)).astype(np.float32) for _ in twin.zero_state(10))
    out, new = registry.keras_module(registry.core_of(spec)).step_of(spec)(
        layer.bundle_variables, tf.constant(x), tuple(tf.constant(s) for s in state))
    twin_out, twin_new = twin.step(x, state)
    np.testing.assert_allclose(twin_out, out.numpy(), atol=1e-5)
    for a, b in zip(twin_new, new):
        np.testing.assert_allclose(a, b.numpy(), atol=1e-5)


HEAD_SPACES = {
    "categorical": EnvSpace("d", 4, True, 5, action_start=2, mask_size=5),
    "multi_categorical": EnvSpace("m", 4, True, 7, action_nvec=(3, 4), action_starts=(0, 1),
                                  mask_size=7),
    "tanh_gaussian": EnvSpace("b", 4, False, 2, action_low=(-2.0, 0.0), action_high=(2.0, 1.0)),
}


def test_the_heads_the_spaces_get_are_the_registrys_kinds():
    """No Config field names a head (the action space chooses it, spec.head_for): each
    kind is some space's head, and no space gets a head the table lacks."""
    assert {name: head_for(space) for name, space in HEAD_SPACES.items()} == {
        name: name for name in registry.HEADS}


@pytest.mark.parametrize("head", registry.HEADS)
def test_each_head_kinds_greedy_action_is_the_workers_deterministic_action(head):
    """What the export serves (networks.greedy_action) against the NumPy head's
    deterministic=True, masked where the space has masks."""
    space = HEAD_SPACES[head]
    spec = spec_of(head=head, num_actions=space.num_actions)
    twin = registry.numpy_head(spec, space)
    assert isinstance(twin, registry.HEADS[head].numpy)
    log_std = {"actor.log_std": [np.full(space.num_actions, -0.5, np.float32)]}
    twin.load({"actor.head": [np.eye(space.num_actions, dtype=np.float32),
                              np.zeros(space.num_actions, np.float32)],
               **(log_std if registry.HEADS[head].log_std else {})}, "actor")
    out = RNG.normal(size=(300, space.num_actions)).astype(np.float32) * 3
    legal = None
    if space.mask_size:  # at least one allowed choice in each component
        legal = RNG.random(out.shape) < 0.6
        legal[:, [int(b) for b in twin.mask_bounds]] = True
    masked = out if legal is None else np.where(legal, out, np.float32(-1e9))
    stored, _ = twin.sample(masked, None, deterministic=True)
    want = twin.env_action(stored)
    got = greedy_action(spec, space, tf.constant(out),
                        None if legal is None else tf.constant(legal)).numpy()
    if space.discrete:
        np.testing.assert_array_equal(got, want)
    else:
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
