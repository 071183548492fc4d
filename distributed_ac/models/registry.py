"""The part kinds, in one table: every encoder, core and action head a run can name, with
its NumPy twin (the workers') and its TensorFlow module (the learner's Keras layer and the
plain-TF forward pass an export runs). The learner (learning/networks.py), the workers
(acting/policy.py) and the export (trained/savedmodel.py) all choose a run's parts here, from
its ModelSpec, as Sample Factory's model_factory chooses its encoder, core and decoder.

A part kind is
- a NumPy twin, a class with `of(spec)` (heads: `of(space)`) whose `load(arrays)` reads the
  part's Weights arrays and whose call computes the part;
- a TF module (named, not imported: this table is read by workers that never load
  TensorFlow) with `from_spec(spec, prefix, seed)`, the Keras layer whose
  `bundle_variables` give those arrays in that order and whose call() runs the module's
  plain-TF forward over them, and `forward_of(spec)` (cores: `step_of(spec)`), that same
  forward over copied arrays for an export;
- its entry below, and a test holding the twin to the Keras layer within 1e-5.
A new encoder kind also adds its name to Config.torso's choices (the config sits below
the models and cannot read this table; tests/unit/test_registry.py keeps the two equal).
"""

from __future__ import annotations

import dataclasses
import importlib

from distributed_ac.models import cnn, cores, heads, mixed, mlp, mlp_ln


@dataclasses.dataclass(frozen=True)
class Kind:
    name: str
    numpy: type
    """The NumPy twin's class."""
    keras: str
    """The TF module's name in distributed_ac.models."""
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


# core_size auto (spec.py): 256 behind the large CNNs (their 512 and 256 features), 128
# behind the small CNN (its 128), an MLP's last width: the LSTM's arithmetic, 4 H (F + H)
# a step, is what a recurrent update costs
ENCODERS = {k.name: k for k in (
    Kind("mlp", mlp.MLPEncoder, "keras_mlp"),
    Kind("mlp_ln", mlp_ln.LayerNormMLPEncoder, "keras_mlp_ln"),
    Kind("nature", cnn.CNNEncoder, "keras_cnn", "image", cnn.min_side("nature"), 256),
    Kind("impala", cnn.CNNEncoder, "keras_cnn", "image", cnn.min_side("impala"), 256),
    Kind("small", cnn.CNNEncoder, "keras_cnn", "image", cnn.min_side("small"), 128),
)}
# an image beside vector entries: the torso named by `encoder` on the image, an mlp on the
# vector entries
MIXED = Kind("mixed", mixed.MixedEncoder, "keras_mixed", "mixed")
CORES = {k.name: k for k in (Kind("lstm", cores.RecurrentCore, "keras_cores"),
                             Kind("gru", cores.RecurrentCore, "keras_cores"))}
HEADS = {k.name: k for k in (
    Kind("categorical", heads.CategoricalHead, "keras_heads"),
    Kind("multi_categorical", heads.MultiCategoricalHead, "keras_heads"),
    Kind("tanh_gaussian", heads.TanhGaussianHead, "keras_heads", log_std=True),
)}


def encoder_of(spec) -> Kind:
    """The encoder kind a ModelSpec's observations go through."""
    return MIXED if spec.mixed else ENCODERS[spec.encoder]


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
    return importlib.import_module(f"distributed_ac.models.{kind.keras}")
