"""CNN torsos for image observations on the TensorFlow side: each torso's forward pass in
plain TF ops over its bundle arrays (`tf_forward`), which the Keras layer's call() runs over
its variables for the learner and an exported SavedModel over its copied arrays. (cnn.py
is the workers' NumPy twin.)

- Nature CNN (Mnih et al. 2015, cleanRL's ppo_atari): conv 32 8x8 stride 4, conv 64
  4x4 stride 2, conv 64 3x3 stride 1 (valid padding), flatten, dense 512, ReLU after each.
- Small CNN (MinAtar's, Young & Tian 2019), for images under 36x36 (MinAtar 10x10,
  MiniGrid 7x7): conv 16 3x3 stride 1 (valid), flatten, dense 128, ReLU after each. It
  and Nature are one layer, ConvStackTorso, over different constants.
- IMPALA ResNet (Espeholt et al. 2018): for 16, 32, 32 channels a 3x3 conv, a 3x3 stride-2
  max-pool and two residual blocks (ReLU, conv, ReLU, conv, + input), all 'same' padded;
  then ReLU, flatten, dense 256, ReLU.

A torso is one Keras layer, so an encoder part (learning/networks.py) is one layer and the shared
topology shares the very same torso object. uint8 images become float x/255 here, inside
the graph: everything before it (env, Batch, object store) moves bytes. The Keras Conv2D
and Dense sublayers hold the variables (the checkpoint's layout) and the cnn_precision
dtype policy; the forward pass computes in that policy's dtype, as those layers did.

`bundle_variables` fixes the order a torso's arrays take in a Weights bundle, which
cnn.py and `tf_forward` read back: each conv's kernel [kh, kw, C_in, C_out] and
bias in the order the image meets them (IMPALA: per stack, its conv, then block 1's two
convs, then block 2's), then the dense kernel and bias.
"""

from __future__ import annotations

import functools

import keras
import tensorflow as tf

# one description of each architecture (and of the pixel scale), shared with the
# workers' NumPy twin
from distributed_ac.models.cnn import (
    CONV_STACKS,
    IMPALA_BLOCKS,
    IMPALA_CHANNELS,
    IMPALA_DENSE,
    UINT8_SCALE,
)
from distributed_ac.models.keras_mlp import add_bias, dense


def _orthogonal(seed: int):
    return keras.initializers.Orthogonal(gain=2 ** 0.5, seed=seed)


# Keras dtype policy per cnn_precision: "mixed_bfloat16" keeps variables float32 and
# computes in bfloat16. Sublayers do not inherit their parent's policy, so a torso hands
# its own to every layer it makes.
POLICIES = {"float32": "float32", "bfloat16": "mixed_bfloat16"}


def _conv(filters: int, kernel: int, stride: int, padding: str, activation, name: str, seed: int,
          dtype=None):
    return keras.layers.Conv2D(filters, kernel, strides=stride, padding=padding,
                               activation=activation, name=name, dtype=dtype,
                               kernel_initializer=_orthogonal(seed))


def _track(layer, prefix: str, sublayers: list) -> list[str]:
    """Sublayers as attributes prefix0, prefix1, ...: tf.train.Checkpoint follows named
    attributes, not a Keras-tracked list (a list left a torso's convs out of checkpoints)."""
    for i, sub in enumerate(sublayers):
        setattr(layer, f"{prefix}{i}", sub)
    return [f"{prefix}{i}" for i in range(len(sublayers))]


def scaled(x):
    """uint8 pixels -> float32 in [0, 1]; float images are taken as they are."""
    if x.dtype == tf.uint8:
        return tf.cast(x, tf.float32) * UINT8_SCALE
    return tf.cast(x, tf.float32)


class ConvStackTorso(keras.layers.Layer):
    """Valid convolutions (`convs`: (filters, kernel, stride) each), each with ReLU, then
    flatten and a dense layer of `units` with ReLU: nature and small (CONV_STACKS)."""

    def __init__(self, seed: int, kind: str, **kwargs):
        super().__init__(**kwargs)
        self.kind = kind
        convs, units = CONV_STACKS[kind]
        dt = self.dtype_policy
        self._convs = _track(self, "conv", [
            _conv(f, k, s, "valid", "relu", f"conv{i}", seed + i, dt)
            for i, (f, k, s) in enumerate(convs)])
        self.flatten = keras.layers.Flatten(dtype=dt)
        self.dense = keras.layers.Dense(units, activation="relu", name="dense", dtype=dt,
                                        kernel_initializer=_orthogonal(seed + 10))

    @property
    def convs(self) -> list:
        return [getattr(self, name) for name in self._convs]

    def build(self, input_shape):
        for conv in self.convs:
            conv.build(input_shape)
            input_shape = conv.compute_output_shape(input_shape)
        self.dense.build(self.flatten.compute_output_shape(input_shape))

    def call(self, x):
        return tf_forward(self.kind, self.bundle_variables, x, self.compute_dtype)

    @property
    def bundle_variables(self) -> list:
        return [v for layer in (*self.convs, self.dense) for v in (layer.kernel, layer.bias)]


class ResidualBlock(keras.layers.Layer):
    """A residual block's two convolutions (ImpalaTorso's call computes the block)."""

    def __init__(self, channels: int, seed: int, **kwargs):
        super().__init__(**kwargs)
        self.conv0 = _conv(channels, 3, 1, "same", None, "conv0", seed, self.dtype_policy)
        self.conv1 = _conv(channels, 3, 1, "same", None, "conv1", seed + 1, self.dtype_policy)

    def build(self, input_shape):
        self.conv0.build(input_shape)
        self.conv1.build(input_shape)

    @property
    def bundle_variables(self) -> list:
        return [self.conv0.kernel, self.conv0.bias, self.conv1.kernel, self.conv1.bias]


class ImpalaTorso(keras.layers.Layer):
    def __init__(self, seed: int, kind: str = "impala", **kwargs):
        super().__init__(**kwargs)
        dt = self.dtype_policy
        self._convs = _track(self, "conv", [_conv(ch, 3, 1, "same", None, f"conv{i}", seed + 10 * i,
                                                  dt) for i, ch in enumerate(IMPALA_CHANNELS)])
        # stack i owns blocks IMPALA_BLOCKS * i ... IMPALA_BLOCKS * (i + 1) - 1
        self._blocks = _track(self, "res", [
            ResidualBlock(ch, seed + 10 * i + 2 + 2 * j, name=f"res{i}_{j}", dtype=dt)
            for i, ch in enumerate(IMPALA_CHANNELS) for j in range(IMPALA_BLOCKS)])
        self.pool = keras.layers.MaxPooling2D(3, strides=2, padding="same", dtype=dt)
        self.flatten = keras.layers.Flatten(dtype=dt)
        self.dense = keras.layers.Dense(IMPALA_DENSE, activation="relu", name="dense", dtype=dt,
                                        kernel_initializer=_orthogonal(seed + 100))

    def build(self, input_shape):
        for i, conv in enumerate(self.convs):
            conv.build(input_shape)
            input_shape = self.pool.compute_output_shape(conv.compute_output_shape(input_shape))
            for block in self._stack_blocks(i):
                block.build(input_shape)
        self.dense.build(self.flatten.compute_output_shape(input_shape))

    def call(self, x):
        return tf_forward("impala", self.bundle_variables, x, self.compute_dtype)

    @property
    def convs(self) -> list:
        return [getattr(self, name) for name in self._convs]

    def _stack_blocks(self, i: int) -> list:
        names = self._blocks[i * IMPALA_BLOCKS:(i + 1) * IMPALA_BLOCKS]
        return [getattr(self, name) for name in names]

    @property
    def bundle_variables(self) -> list:
        out = []
        for i, conv in enumerate(self.convs):
            out += [conv.kernel, conv.bias]
            for block in self._stack_blocks(i):
                out += block.bundle_variables
        return out + [self.dense.kernel, self.dense.bias]


TORSOS = {**{kind: ConvStackTorso for kind in CONV_STACKS}, "impala": ImpalaTorso}


def make_torso(kind: str, name: str, seed: int, precision: str = "float32") -> keras.layers.Layer:
    return TORSOS[kind](seed, kind=kind, name=name, dtype=POLICIES[precision])


def from_spec(spec, prefix: str, seed: int) -> keras.layers.Layer:
    """The spec's torso (its kind and cnn_precision) for the learner."""
    return make_torso(spec.encoder, f"{prefix}_{spec.encoder}", seed, spec.cnn_precision)


def forward_of(spec):
    """What an export runs: tf_forward over copied arrays, in float32 (as the workers'
    NumPy twin computes, whatever cnn_precision the learner trained in)."""
    return functools.partial(tf_forward, spec.encoder)


def _conv_tf(x, kernel, bias, stride: int, padding: str):
    """Keras' Conv2D without its activation: the convolution, then its bias."""
    return add_bias(tf.nn.convolution(x, kernel, stride, padding), bias)


def _flatten(x):
    """[B, H, W, C] -> [B, H * W * C], NHWC order, as Keras' Flatten (and cnn.py) lay it out."""
    return tf.reshape(x, [tf.shape(x)[0], x.shape[1] * x.shape[2] * x.shape[3]])


def _impala_stacks(arrays, x):
    for _ in IMPALA_CHANNELS:
        x = tf.nn.max_pool2d(_conv_tf(x, next(arrays), next(arrays), 1, "SAME"), 3, 2, "SAME")
        for _ in range(IMPALA_BLOCKS):
            y = _conv_tf(tf.nn.relu(x), next(arrays), next(arrays), 1, "SAME")
            x = x + _conv_tf(tf.nn.relu(y), next(arrays), next(arrays), 1, "SAME")
    return x


def tf_forward(kind: str, params: list, x, dtype=tf.float32):
    """The torso over its bundle arrays (variables or tensors): [B, H, W, C] uint8 or float
    images -> [B, features], computed in `dtype` (bfloat16: a mixed-precision learner's;
    the arrays are cast to it as Keras autocasts its layers' variables)."""
    x = tf.cast(scaled(x), dtype)
    arrays = (tf.cast(p, dtype) for p in params)
    if kind in CONV_STACKS:
        for _, _, stride in CONV_STACKS[kind][0]:
            x = tf.nn.relu(_conv_tf(x, next(arrays), next(arrays), stride, "VALID"))
        x = _flatten(x)
    else:
        x = tf.nn.relu(_flatten(_impala_stacks(arrays, x)))
    return tf.nn.relu(dense(x, next(arrays), next(arrays)))
