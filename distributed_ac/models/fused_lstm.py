"""The learner's LSTM unroll through fused kernels instead of ~15 small ops a step forward
and twice that backward: forward, TensorFlow's BlockLSTM op (the whole sequence in one
op); backward, for a chunk's short static T, one fused cell-gradient op and one matmul a
step (_segments_lstm), else BlockLSTM's own gradient op.

BlockLSTM cannot zero a state mid-sequence, and a rollout's columns hold several episodes.
So each column is cut where an episode begins into segments, runs of steps within one
episode; the segments are laid side by side, padded at their ends, [L, S], each
entered with its column's stored state (a segment at the rollout's first step) or with
zeros (a segment an episode begins). Padding comes after a segment's last step, so it
never changes a real step's output, and the outputs are gathered back to [T, M].

The cell is the one keras_cores.tf_step computes, gates i, f, g, o in kernel order;
BlockLSTM takes them as i, g, f, o (its ICFO layout), with no forget bias and no cell
clip. BlockLSTMV2 reads our layout directly, but its CPU gradient disagrees with finite
differences, so the V1 op with permuted gate columns is used.
"""

from __future__ import annotations

import tensorflow as tf

# The longest static unroll the hand-written backward takes (its graph holds one step's
# ops per step; past this, padding every segment to T costs more than it saves).
STATIC_UNROLL_MAX = 64


def _icfo(m):
    """[..., 4H] columns in our (i, f, g, o) order -> BlockLSTM's (i, g, f, o). A split,
    whose gradient is one concat (a strided slice's is a zero-filled full-size tensor)."""
    i, f, g, o = tf.split(m, 4, -1)
    return tf.concat([i, g, f, o], -1)


def segments(starts):
    """Cut each column of starts [T, M] (true where an episode begins) into runs within
    one episode. Returns (where [T * M] int32: each step's row in a padded [L * S]
    layout, any L >= max_len, in column-major step order; first [S]: the column-major
    index of each segment's first step; S; max_len)."""
    steps, cols = tf.shape(starts)[0], tf.shape(starts)[1]
    begins = tf.logical_or(tf.cast(tf.transpose(starts), tf.bool),  # [M, T]
                           tf.range(steps)[None, :] == 0)
    begins = tf.reshape(begins, [-1])
    seg = tf.cumsum(tf.cast(begins, tf.int32)) - 1
    first = tf.cast(tf.reshape(tf.where(begins), [-1]), tf.int32)
    offset = tf.range(steps * cols) - tf.gather(first, seg)
    count = tf.shape(first)[0]
    max_len = tf.reduce_max(offset) + 1
    return offset * count + seg, first, count, max_len


def unroll(x, state, starts, kernel, recurrent, bias):
    """The LSTM over x [T, M, F] from state (h, c) [M, H], zeroed where starts [T, M]:
    (h [T, M, H], c [T, M, H]), every step's output and cell state."""
    steps, cols, width = tf.shape(x)[0], tf.shape(x)[1], tf.shape(x)[2]
    n = recurrent.shape[0]
    h0, c0 = state
    where, first, count, max_len = segments(starts)
    # A short static T (a chunk): segments padded to T, which the hand-written backward
    # unrolls. A long or unknown one (a whole rollout): padded to the longest segment,
    # with BlockLSTM's own gradient, whose cost grows with the padded steps, not with T.
    static = x.shape[0] is not None and x.shape[0] <= STATIC_UNROLL_MAX
    pad = x.shape[0] if static else max_len
    x_cm = tf.reshape(tf.transpose(x, [1, 0, 2]), [steps * cols, -1])
    x_pad = tf.reshape(tf.scatter_nd(where[:, None], x_cm, [pad * count, width]),
                       [pad, count, width])
    col, t0 = first // steps, first % steps
    entered = 1.0 - tf.cast(tf.gather_nd(starts, tf.stack([t0, col], 1)), x.dtype)[:, None]
    h_init, c_init = tf.gather(h0, col) * entered, tf.gather(c0, col) * entered
    w, b = _icfo(tf.concat([kernel, recurrent], 0)), _icfo(bias)
    # every padded step is computed: what BlockLSTM leaves beyond seq_len_max is not zero
    args = (x_pad, h_init, c_init, w, b, tf.cast(pad, tf.int64))
    if static:
        h, cs = _segments_lstm(*args)
    else:
        outs = _block_lstm(*args)
        h, cs = outs[6], outs[1]

    def back(t):  # [pad, S, H] -> [T, M, H]
        t = tf.gather(tf.reshape(t, [pad * count, n]), where)
        return tf.transpose(tf.reshape(t, [cols, steps, n]), [1, 0, 2])

    return back(h), back(cs)


def _block_lstm(x, h_init, c_init, w, b, seq_len):
    """BlockLSTM over [L, S, F] padded segments: every op output (i, cs, f, o, ci, co, h)."""
    zeros = tf.zeros([tf.shape(h_init)[1]], x.dtype)
    return tf.raw_ops.BlockLSTM(seq_len_max=seq_len, x=x, cs_prev=c_init, h_prev=h_init, w=w,
                                wci=zeros, wcf=zeros, wco=zeros, b=b, forget_bias=0.0,
                                cell_clip=-1.0, use_peephole=False)


def _transposed(m):
    """m's transpose as a matrix of its own: a matmul with transpose_b runs ~8x slower
    than one on a transposed copy at these sizes, and grappler folds a lone transpose
    back into the matmul; transposing the gate blocks and joining them stops that."""
    return tf.concat([tf.transpose(block) for block in tf.split(m, 4, -1)], 0)


@tf.custom_gradient
def _segments_lstm(x, h_init, c_init, w, b, seq_len):
    """(h, cs) [L, S, H] of BlockLSTM over padded segments of a static length L, with a
    backward of one fused cell-gradient op and one matmul a step. BlockLSTM's own
    gradient adds each step's [F + H, 4H] weight gradient into the total as it goes;
    here the gate gradients of all steps are stacked and the weight gradient is one
    matmul at the end."""
    i, cs, f, o, ci, co, h = _block_lstm(x, h_init, c_init, w, b, seq_len)
    width = x.shape[-1]

    def grad(dh, dcs):
        steps = x.shape[0]
        h_prev = tf.concat([h_init[None], h[:-1]], 0)
        c_prev = tf.concat([c_init[None], cs[:-1]], 0)
        zeros = tf.zeros([tf.shape(h_init)[1]], x.dtype)
        dh = tf.zeros_like(h) if dh is None else dh
        dcs = tf.zeros_like(cs) if dcs is None else dcs
        parts = [tf.unstack(t) for t in (x, h_prev, c_prev, i, cs, f, o, ci, co, dh, dcs)]
        dh_next, dc_next, dz = tf.zeros_like(h_init), tf.zeros_like(c_init), [None] * steps
        w_ht, w_xt = _transposed(w[width:]), _transposed(w[:width])
        for t in reversed(range(steps)):
            x_t, hp, cp, i_t, cs_t, f_t, o_t, ci_t, co_t, dh_t, dc_t = (p[t] for p in parts)
            dc_next, dz[t], *_ = tf.raw_ops.LSTMBlockCellGrad(
                x=x_t, cs_prev=cp, h_prev=hp, w=w, wci=zeros, wcf=zeros, wco=zeros, b=b,
                i=i_t, cs=cs_t, f=f_t, o=o_t, ci=ci_t, co=co_t, cs_grad=dc_t + dc_next,
                h_grad=dh_t + dh_next, use_peephole=False)
            dh_next = tf.matmul(dz[t], w_ht)
        dz = tf.stack(dz)
        flat_dz = tf.reshape(dz, [-1, dz.shape[-1]])
        xh = tf.reshape(tf.concat([x, h_prev], -1), [-1, w.shape[0]])
        dx = tf.reshape(tf.matmul(flat_dz, w_xt), [steps, -1, width])
        return (dx, dh_next, dc_next, tf.matmul(xh, flat_dz, transpose_a=True),
                tf.reduce_sum(flat_dz, 0), None)

    return (h, cs), grad
