"""A user's encoder in the part registry: named `module:attr`, resolved by importing the
module in whichever process asks, each bad name one ConfigError line; its twin held to
its Keras layer when the networks are built; an export of a TF module without
forward_of refused in one line. tests/own_torso.py is the user's encoder."""

import subprocess
import sys

import numpy as np
import pytest

from distributed_ac.config.schema import Config
from distributed_ac.core.errors import ConfigError, UsageError
from distributed_ac.envs.space import EnvSpace
from distributed_ac.models import registry
from distributed_ac.models.spec import ModelSpec

CARTPOLE = EnvSpace("CartPole-v1", 4, True, 2)


def spec_for(torso: str) -> ModelSpec:
    return ModelSpec.of(Config(torso=torso), CARTPOLE)


def test_a_module_attr_torso_resolves_to_the_kind_its_module_registers():
    import own_torso

    spec = spec_for("own_torso:gated")
    assert spec.encoder == "own_torso:gated"
    assert registry.encoder_of(spec) is own_torso.gated
    assert registry.ENCODERS["gated"] is own_torso.gated
    assert isinstance(registry.numpy_encoder(spec), own_torso.GatedTwin)
    assert not registry.is_shipped(own_torso.gated) and registry.is_shipped(
        registry.ENCODERS["mlp"])


@pytest.mark.parametrize("torso, says", [
    ("no_such_module_dac:enc", "torso no_such_module_dac:enc: cannot import no_such_module_dac"),
    ("own_torso:nothing", "torso own_torso:nothing: module own_torso has no nothing"),
    ("own_torso:GatedTwin", "torso own_torso:GatedTwin: GatedTwin is not an encoder kind"),
])
def test_a_torso_that_names_no_encoder_is_one_config_error_line(torso, says):
    with pytest.raises(ConfigError) as e:
        spec_for(torso)
    assert str(e.value).startswith(says) and "\n" not in str(e.value), str(e.value)


def test_the_shipped_cnns_precision_and_mixed_observations_are_refused_for_a_users_encoder():
    with pytest.raises(ConfigError, match="cnn_precision bfloat16 is for the shipped CNN"):
        ModelSpec.of(Config(torso="own_torso:gated", cnn_precision="bfloat16"), CARTPOLE)
    from distributed_ac.models.spec import encoder_for

    with pytest.raises(ConfigError, match="image beside vector entries, which only the shipped"):
        encoder_for(Config(torso="own_torso:gated"), (4,), mixed=True)


def test_a_bare_name_that_is_not_shipped_is_refused_by_the_config():
    """A name registered in one process only (the driver's) would be unknown to workers."""
    with pytest.raises(ConfigError, match="torso must be one of auto, mlp, .* or module:attr"):
        Config(torso="gated")


def test_a_taken_name_is_refused_for_another_kind_and_allowed_again_for_the_same():
    kind = registry.ENCODERS["mlp"]
    assert registry.register_encoder("mlp", kind.numpy, kind.keras) == kind
    with pytest.raises(ConfigError, match="encoder mlp is registered already"):
        registry.register_encoder("mlp", kind.numpy, "mypkg.other_tf")


def test_the_users_module_imports_no_tensorflow_where_workers_import_it():
    code = ("import sys; sys.path.insert(0, 'tests'); import own_torso; "
            "from distributed_ac.acting import numpy_policy; "
            "assert not {'tensorflow', 'keras'} & set(sys.modules), 'TensorFlow imported'")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]


def test_building_the_networks_holds_the_twin_to_its_layer():
    from distributed_ac.learning.networks import build_networks

    nets = build_networks(spec_for("own_torso:gated"), CARTPOLE, seed=0)  # agrees: no error
    assert [v.shape for v in nets.parts["actor.encoder"].bundle_variables] == [
        (4, 64), (64,), (4, 64), (64,)]
    with pytest.raises(UsageError, match=r"^torso own_torso:gated_wrong: its NumPy twin "
                                         r"WrongTwin disagrees .* max difference"):
        build_networks(spec_for("own_torso:gated_wrong"), CARTPOLE, seed=0)


def test_a_twin_within_the_tolerance_passes_and_one_just_outside_is_refused(monkeypatch):
    """The tolerance is 1e-4 of the layer's largest output (at least 1): a twin off by
    half of it passes, one off by twice it does not."""
    import own_torso

    from distributed_ac.learning import twin_check
    from distributed_ac.learning.networks import build_networks

    spec = spec_for("own_torso:gated")
    for offset, refused in ((0.5e-4, False), (2e-4, True)):
        monkeypatch.setattr(own_torso.GatedTwin, "__call__",
                            lambda self, x, d=offset: np.tanh(x @ self.w + self.b) / (
                                1 + np.exp(-(x @ self.wg + self.bg))) + np.float32(d))
        if refused:
            with pytest.raises(UsageError, match="max difference 0.0002"):
                build_networks(spec, CARTPOLE, seed=0)
        else:
            build_networks(spec, CARTPOLE, seed=0)
    assert twin_check.TOLERANCE == 1e-4


def test_an_export_of_a_tf_module_without_forward_of_is_one_line(monkeypatch):
    import own_torso

    from distributed_ac.trained.savedmodel import _encoder_forward

    plain = registry.Kind("plain", own_torso.GatedTwin, "own_torso")  # a module without one
    monkeypatch.setitem(registry.ENCODERS, "plain", plain)
    monkeypatch.setattr(own_torso, "plain", plain, raising=False)
    with pytest.raises(UsageError, match=r"^torso own_torso:plain: own_torso has no "
                                         r"forward_of\(spec\)"):
        _encoder_forward(spec_for("own_torso:plain"))
    assert callable(_encoder_forward(spec_for("own_torso:gated")))
