"""CNN torsos for image observations: Keras layers for the learner, and a plain-TF twin
over a flat parameter list for the exported SavedModel. (cnn.py is the workers'.)

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
the graph: everything before it (env, Batch, object store) moves bytes.

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
    flatten and a dense layer of `dense` units with ReLU: nature and small (CONV_STACKS)."""

    def __init__(self, seed: int, convs: tuple, dense: int, **kwargs):
        super().__init__(**kwargs)
        dt = self.dtype_policy
        self._convs = _track(self, "conv", [
            _conv(f, k, s, "valid", "relu", f"conv{i}", seed + i, dt)
            for i, (f, k, s) in enumerate(convs)])
        self.flatten = keras.layers.Flatten(dtype=dt)
        self.dense = keras.layers.Dense(dense, activation="relu", name="dense", dtype=dt,
                                        kernel_initializer=_orthogonal(seed + 10))

    @property
    def convs(self) -> list:
        return [getattr(self, name) for name in self._convs]

    def call(self, x):
        x = scaled(x)
        for conv in self.convs:
            x = conv(x)
        return self.dense(self.flatten(x))

    @property
    def bundle_variables(self) -> list:
        return [v for layer in (*self.convs, self.dense) for v in (layer.kernel, layer.bias)]


class ResidualBlock(keras.layers.Layer):
    def __init__(self, channels: int, seed: int, **kwargs):
        super().__init__(**kwargs)
        self.conv0 = _conv(channels, 3, 1, "same", None, "conv0", seed, self.dtype_policy)
        self.conv1 = _conv(channels, 3, 1, "same", None, "conv1", seed + 1, self.dtype_policy)

    def call(self, x):
        y = self.conv0(tf.nn.relu(x))
        return x + self.conv1(tf.nn.relu(y))

    @property
    def bundle_variables(self) -> list:
        return [self.conv0.kernel, self.conv0.bias, self.conv1.kernel, self.conv1.bias]


class ImpalaTorso(keras.layers.Layer):
    def __init__(self, seed: int, **kwargs):
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

    def call(self, x):
        x = scaled(x)
        for i, conv in enumerate(self.convs):
            x = self.pool(conv(x))
            for block in self._stack_blocks(i):
                x = block(x)
        return self.dense(tf.nn.relu(self.flatten(x)))

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


TORSOS = {**{kind: functools.partial(ConvStackTorso, convs=convs, dense=dense)
             for kind, (convs, dense) in CONV_STACKS.items()},
          "impala": ImpalaTorso}


def make_torso(kind: str, name: str, seed: int, precision: str = "float32") -> keras.layers.Layer:
    return TORSOS[kind](seed, name=name, dtype=POLICIES[precision])


def _conv_tf(x, kernel, bias, stride: int, padding: str):
    return tf.nn.conv2d(x, kernel, stride, padding) + bias


def tf_forward(kind: str, params: list, x):
    """The torso in plain TF ops over its bundle arrays (variables or tensors): what an
    exported SavedModel runs, with no Keras object in it."""
    x = scaled(x)
    it = iter(params)
    if kind in CONV_STACKS:
        for _, _, stride in CONV_STACKS[kind][0]:
            x = tf.nn.relu(_conv_tf(x, next(it), next(it), stride, "VALID"))
    else:
        for _ in IMPALA_CHANNELS:
            x = tf.nn.max_pool2d(_conv_tf(x, next(it), next(it), 1, "SAME"), 3, 2, "SAME")
            for _ in range(IMPALA_BLOCKS):
                y = _conv_tf(tf.nn.relu(x), next(it), next(it), 1, "SAME")
                x = x + _conv_tf(tf.nn.relu(y), next(it), next(it), 1, "SAME")
        x = tf.nn.relu(x)
    x = tf.reshape(x, [tf.shape(x)[0], -1])
    return tf.nn.relu(tf.matmul(x, next(it)) + next(it))
