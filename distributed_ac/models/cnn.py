"""The CNN torsos' forward pass in NumPy, for rollout workers (which never import
TensorFlow). The architecture constants live here so that keras_cnn.py (Keras) and this module
describe one network; a test holds the two to 1e-5.

Each convolution is im2col then one matmul: `sliding_window_view` gives every output
position's receptive field as a view, one copy lays those fields out as rows (casting
uint8 pixels to float32 on the way for the first layer), and a single BLAS call
multiplies them by the kernel, whose [kh, kw, C_in, C_out] layout is already the
patches' row order. The first layer's kernel also absorbs the 1/255 scaling of uint8
images (one fewer pass over the frames). Frames go through in blocks of
BLOCK so that a layer's patch matrix stays a few MB.
"""

from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

NATURE_CONVS = ((32, 8, 4), (64, 4, 2), (64, 3, 1))  # (filters, kernel, stride), valid
NATURE_DENSE = 512
SMALL_CONVS = ((16, 3, 1),)  # MinAtar's network (Young & Tian 2019), for images under 36x36
SMALL_DENSE = 128
# the plain stacks (valid convs, each with ReLU, then dense + ReLU): one code path, here and
# in keras_cnn.py, with each kind's (convs, dense width)
CONV_STACKS = {"nature": (NATURE_CONVS, NATURE_DENSE), "small": (SMALL_CONVS, SMALL_DENSE)}
IMPALA_CHANNELS = (16, 32, 32)  # each: 3x3 conv, 3x3/2 max-pool, IMPALA_BLOCKS res blocks
IMPALA_DENSE = 256
IMPALA_BLOCKS = 2
UINT8_SCALE = np.float32(1.0 / 255.0)
BLOCK = 32  # frames per pass through the layers (the measurement in benchmarks/notebook/pixels/numpy_cnn.py)


def bundle_size(kind: str) -> int:
    """How many arrays a torso puts at the front of a Weights path (kernel, bias each)."""
    if kind in CONV_STACKS:
        return 2 * (len(CONV_STACKS[kind][0]) + 1)
    if kind == "impala":
        return 2 * (len(IMPALA_CHANNELS) * (1 + 2 * IMPALA_BLOCKS) + 1)
    raise ValueError(f"unknown torso '{kind}'")


def min_side(kind: str) -> int:
    """The smallest image side a torso's strides leave at least 1 x 1 of (valid
    convolutions, from the output back); IMPALA's 'same' convolutions and pools take any."""
    side = 1
    for _, k, s in reversed(CONV_STACKS[kind][0] if kind in CONV_STACKS else ()):
        side = (side - 1) * s + k
    return side


class Conv:
    """One convolution (square kernel) as im2col + matmul; 'same' pads by k // 2 (TF's
    SAME for odd kernels at stride 1, which is the only way IMPALA uses it)."""

    def __init__(self, kernel: np.ndarray, bias: np.ndarray, stride: int, same: bool):
        k, _, c_in, c_out = kernel.shape
        self.k, self.stride, self.pad = k, stride, (k // 2 if same else 0)
        # patches are laid out (kh, kw, C_in), the kernel's own row order
        self.w = np.ascontiguousarray(kernel.reshape(k * k * c_in, c_out), dtype=np.float32)
        self.w_uint8 = self.w * UINT8_SCALE  # for byte images: x/255 folded into the kernel
        self.b = np.asarray(bias, np.float32)
        self._cols = self._out = np.empty(0, np.float32)

    def _buffers(self, shape: tuple, rows: int) -> tuple[np.ndarray, np.ndarray]:
        """The patch and output arrays, kept between calls: a fresh 13 MB patch matrix is
        a new mapping whose pages fault on first touch (the lesson of mlp.py)."""
        if self._cols.shape != shape:
            self._cols = np.empty(shape, np.float32)
            self._out = np.empty((rows, self.w.shape[1]), np.float32)
        return self._cols, self._out

    def __call__(self, x: np.ndarray) -> np.ndarray:
        if self.pad:
            p = self.pad
            x = np.pad(x, ((0, 0), (p, p), (p, p), (0, 0)))
        s = self.stride
        # [B, OH, OW, kh, kw, C]: a kernel row's kw x C pixels are contiguous in x, so the
        # copy below moves runs of kw * C values, not C-strided singles ((C, kh, kw) order,
        # sliding_window_view's own, made the copy ~2x slower than the matmul)
        win = sliding_window_view(x, (self.k, self.k), axis=(1, 2))[:, ::s, ::s]
        win = win.transpose(0, 1, 2, 4, 5, 3)
        b, oh, ow = win.shape[:3]
        cols, y = self._buffers(win.shape, b * oh * ow)
        np.copyto(cols, win)  # the im2col copy (and the uint8 -> float32 cast)
        w = self.w_uint8 if x.dtype == np.uint8 else self.w
        np.matmul(cols.reshape(b * oh * ow, -1), w, out=y)
        y += self.b
        return y.reshape(b, oh, ow, -1)  # a view of the buffer: valid until the next call


def relu(x: np.ndarray) -> np.ndarray:
    return np.maximum(x, np.float32(0.0), out=x)


def max_pool_3x3_s2_same(x: np.ndarray) -> np.ndarray:
    """TF's max_pool2d(x, 3, 2, 'SAME'): ceil(H / 2) outputs, the padding split with the
    odd cell at the end, padded cells never win. Separable: rows, then columns."""
    def pads(n):
        out = -(-n // 2)
        total = max(2 * (out - 1) + 3 - n, 0)
        return out, (total // 2, total - total // 2)

    (oh, ph), (ow, pw) = pads(x.shape[1]), pads(x.shape[2])
    x = np.pad(x, ((0, 0), ph, pw, (0, 0)), constant_values=-np.inf)
    r = np.maximum(np.maximum(x[:, 0:2 * oh:2], x[:, 1:2 * oh + 1:2]), x[:, 2:2 * oh + 2:2])
    return np.maximum(np.maximum(r[:, :, 0:2 * ow:2], r[:, :, 1:2 * ow + 1:2]),
                      r[:, :, 2:2 * ow + 2:2])


class NumpyTorso:
    """A CNN torso over its Weights arrays (keras_cnn.py's bundle order): [B, H, W, C] uint8 or
    float32 images -> [B, features] float32."""

    def __init__(self, kind: str, params: list[np.ndarray]):
        if len(params) != bundle_size(kind):
            raise ValueError(f"torso {kind} takes {bundle_size(kind)} arrays, got {len(params)}")
        self.kind = kind
        it = iter(params)
        self.plain = kind in CONV_STACKS
        if self.plain:
            self.convs = [Conv(next(it), next(it), s, same=False)
                          for _, _, s in CONV_STACKS[kind][0]]
        else:
            n = len(IMPALA_CHANNELS) * (1 + 2 * IMPALA_BLOCKS)
            self.convs = [Conv(next(it), next(it), 1, same=True) for _ in range(n)]
        self.dense_w = np.asarray(next(it), np.float32)
        self.dense_b = np.asarray(next(it), np.float32)

    def __call__(self, x: np.ndarray) -> np.ndarray:
        out = np.empty((len(x), self.dense_w.shape[1]), np.float32)
        for i in range(0, len(x), BLOCK):
            out[i:i + BLOCK] = self._block(x[i:i + BLOCK])
        return out

    def _block(self, x: np.ndarray) -> np.ndarray:
        x = self._plain_stack(x) if self.plain else self._impala(x)
        y = x.reshape(len(x), -1) @ self.dense_w  # NHWC flattened as Keras' Flatten does
        y += self.dense_b
        return relu(y)

    def _plain_stack(self, x):
        for conv in self.convs:
            x = relu(conv(x))
        return x

    def _impala(self, x):
        convs = iter(self.convs)
        for _ in IMPALA_CHANNELS:
            x = max_pool_3x3_s2_same(next(convs)(x))
            for _ in range(IMPALA_BLOCKS):
                y = next(convs)(np.maximum(x, np.float32(0.0)))
                x = x + next(convs)(relu(y))
        return np.maximum(x, np.float32(0.0))


class CNNEncoder:
    """The nature, small or impala encoder over its part's arrays (keras_cnn.py's bundle order)."""

    def __init__(self, kind: str):
        self.kind = kind
        self.torso: NumpyTorso | None = None

    @classmethod
    def of(cls, spec) -> "CNNEncoder":
        return cls(spec.encoder)

    def load(self, arrays: list[np.ndarray]) -> None:
        self.torso = NumpyTorso(self.kind, arrays)

    def __call__(self, x: np.ndarray) -> np.ndarray:
        return self.torso(x)
