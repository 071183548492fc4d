"""The part kinds, in one table: every encoder, core and action head a run can name, with
its NumPy twin (the workers') and its TensorFlow module (the learner's Keras layer and the
plain-TF forward pass an export runs). The learner (learning/networks.py), the workers
(acting/numpy_policy.py) and the export (trained/savedmodel.py) all choose a run's parts
here, from its ModelSpec, as Sample Factory's model_factory chooses its encoder, core and
decoder.

A part kind is
- a NumPy twin, a class with `of(spec)` (heads: `of(space)`) whose `load(arrays)` reads the
  part's Weights arrays and whose call computes the part;
- a TF module (named, not imported: this table is read by workers that never load
  TensorFlow) with `from_spec(spec, prefix, seed)`, the Keras layer whose
  `bundle_variables` give those arrays in that order and whose call() runs the module's
  plain-TF forward over them, and `forward_of(spec)` (cores: `step_of(spec)`), that same
  forward over copied arrays for an export;
- its entry below, and a test holding the twin to the Keras layer within 1e-5.

Encoders enter the table through register_encoder, the shipped ones below and a user's
own (docs/guide/own-networks.md) alike. A user's encoder is named `module:attr` (Config.torso),
never by its bare name: each process that reads the table (the driver, every Ray worker,
`dac evaluate`, `dac export`) imports `module` itself, and that import registers it there,
so a registration made in the driver alone cannot be missed by a worker. Its twin is held
to its Keras layer at start-up instead of by a test (learning/twin_check.py).
A new shipped encoder kind also adds its name to Config.torso's choices (the config sits
below the models and cannot read this table; tests/unit/test_registry.py keeps them equal).
"""

from __future__ import annotations

import dataclasses
import importlib

from distributed_ac.core.errors import ConfigError
from distributed_ac.models import cnn, cores, heads, mixed, mlp, mlp_ln

OURS = "distributed_ac.models"  # where the shipped parts' TF modules live


@dataclasses.dataclass(frozen=True)
class Kind:
    name: str
    numpy: type
    """The NumPy twin's class."""
    keras: str
    """The TF module's full name (distributed_ac.models.keras_mlp, mypkg.parts_tf)."""
    reads: str = "vector"
    """Encoders: the observations it reads, vector, image or mixed (an image beside vector
    entries)."""
    min_side: int = 0
    """Image encoders: the smallest image side it can read."""
    core_size: int = 0
    """Encoders: core_size auto behind it; 0 is its last hidden layer's width."""
    log_std: bool = False
    """Action heads: a state-independent log_std beside the dense layer."""

    @property
    def images(self) -> bool:
        return self.reads != "vector"


ENCODERS: dict[str, Kind] = {}


def register_encoder(name: str, numpy: type, keras: str, reads: str = "vector",
                     min_side: int = 0, core_size: int = 0) -> Kind:
    """Add an encoder kind to the table and return it: `numpy` the twin's class, `keras`
    the TF module's full name (imported only where TensorFlow is loaded), `reads` vector
    or image. Registering a name again is allowed only with the same kind (a module
    imported twice, say); a different kind under a taken name is a ConfigError."""
    if reads not in ("vector", "image"):
        raise ConfigError(f"encoder {name}: reads must be vector or image, got {reads!r}")
    kind = Kind(name, numpy, keras, reads, min_side, core_size)
    if ENCODERS.get(name, kind) != kind:
        raise ConfigError(f"encoder {name} is registered already, as {ENCODERS[name].keras}")
    ENCODERS[name] = kind
    return kind


# core_size auto (spec.py): 256 behind the large CNNs (their 512 and 256 features), 128
# behind the small CNN (its 128), an MLP's last width: the LSTM's arithmetic, 4 H (F + H)
# a step, is what a recurrent update costs
register_encoder("mlp", mlp.MLPEncoder, f"{OURS}.keras_mlp")
register_encoder("mlp_ln", mlp_ln.LayerNormMLPEncoder, f"{OURS}.keras_mlp_ln")
for _cnn, _core_size in (("nature", 256), ("impala", 256), ("small", 128)):
    register_encoder(_cnn, cnn.CNNEncoder, f"{OURS}.keras_cnn", "image", cnn.min_side(_cnn),
                     _core_size)
SHIPPED = tuple(ENCODERS)
"""The encoders this package ships: Config.torso's choices besides auto."""
# an image beside vector entries: the shipped torso named by `encoder` on the image, an
# mlp on the vector entries
MIXED = Kind("mixed", mixed.MixedEncoder, f"{OURS}.keras_mixed", "mixed")
CORES = {k.name: k for k in (Kind("lstm", cores.RecurrentCore, f"{OURS}.keras_cores"),
                             Kind("gru", cores.RecurrentCore, f"{OURS}.keras_cores"))}
HEADS = {k.name: k for k in (
    Kind("categorical", heads.CategoricalHead, f"{OURS}.keras_heads"),
    Kind("multi_categorical", heads.MultiCategoricalHead, f"{OURS}.keras_heads"),
    Kind("tanh_gaussian", heads.TanhGaussianHead, f"{OURS}.keras_heads", log_std=True),
)}


def encoder_kind(torso: str) -> Kind:
    """The encoder kind a torso names: a shipped one by its name, a user's by `module:attr`
    (the module imported here, in whichever process asks, which registers it; `attr` the
    Kind register_encoder returned). A name that resolves to no encoder is a ConfigError."""
    if torso in SHIPPED:
        return ENCODERS[torso]
    module_name, _, attr = torso.partition(":")
    if not module_name or not attr:
        raise ConfigError(f"torso {torso}: name your own encoder as module:attr")
    kind = getattr(_import(torso, module_name), attr, None)
    if kind is None:
        raise ConfigError(f"torso {torso}: module {module_name} has no {attr}")
    if not isinstance(kind, Kind) or ENCODERS.get(kind.name) != kind:
        raise ConfigError(f"torso {torso}: {attr} is not an encoder kind (make it with "
                          "distributed_ac.models.registry.register_encoder)")
    return kind


def _import(torso: str, module_name: str):
    """The user's module; whatever its import raises becomes one ConfigError line."""
    try:
        return importlib.import_module(module_name)
    except ImportError as e:
        raise ConfigError(f"torso {torso}: cannot import {module_name}: {e} (put it on "
                          "PYTHONPATH, or install it, on every node that runs workers)") from None
    except Exception as e:  # the module's own failure on import
        why = " ".join(str(e).split())
        raise ConfigError(f"torso {torso}: importing {module_name} raised "
                          f"{type(e).__name__}: {why}") from None


def is_shipped(kind: Kind) -> bool:
    """One of this package's own parts (held to its Keras layer by the tests)."""
    return kind.keras.startswith(OURS + ".")


def encoder_of(spec) -> Kind:
    """The encoder kind a ModelSpec's observations go through."""
    return MIXED if spec.mixed else encoder_kind(spec.encoder)


def core_of(spec) -> Kind | None:
    """The recurrent core kind, None for a feed-forward model."""
    return CORES[spec.core] if spec.recurrent else None


def head_of(spec) -> Kind:
    return HEADS[spec.head]


def numpy_encoder(spec):
    return encoder_of(spec).numpy.of(spec)


def numpy_core(spec):
    return core_of(spec).numpy.of(spec)


def numpy_head(spec, space):
    return head_of(spec).numpy.of(space)


def keras_module(kind: Kind):
    """The kind's TF module, imported on first use: only where TensorFlow is loaded."""
    return importlib.import_module(kind.keras)
