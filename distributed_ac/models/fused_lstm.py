"""The learner's LSTM unroll through fused kernels instead of ~15 small ops a step forward
and twice that backward. A chunk's short static T (_masked_lstm): one fused cell op a
step forward (LSTMBlockCell), its state zeroed where an episode begins, and a backward
of one fused cell-gradient op and one matmul a step. A whole rollout of long or unknown
T: TensorFlow's BlockLSTM op over episode segments, with BlockLSTM's own gradient.

BlockLSTM cannot zero a state mid-sequence, and a rollout's columns hold several episodes.
So each column is cut where an episode begins into segments, runs of steps within one
episode; the segments are laid side by side, padded at their ends, [L, S], each
entered with its column's stored state (a segment at the rollout's first step) or with
zeros (a segment an episode begins). Padding comes after a segment's last step, so it
never changes a real step's output, and the outputs are gathered back to [T, M].

The cell is the one keras_cores.tf_step computes, gates i, f, g, o in kernel order;
the block ops take them as i, g, f, o (their ICFO layout), with no forget bias and no
cell clip. BlockLSTMV2 reads our layout directly, but its CPU gradient disagrees with
finite differences, so the V1 ops with permuted gate columns are used.
"""

from __future__ import annotations

import tensorflow as tf

# The longest static unroll taken step by step (its graph holds a few ops per step;
# past this, BlockLSTM over segments costs less).
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
    w, b = _icfo(tf.concat([kernel, recurrent], 0)), _icfo(bias)
    if x.shape[0] is not None and x.shape[0] <= STATIC_UNROLL_MAX:
        keep = 1.0 - tf.cast(starts, x.dtype)[..., None]
        return _masked_lstm(x, keep, state[0], state[1], w, b)
    return _segments_unroll(x, state, starts, w, b)


def _segments_unroll(x, state, starts, w, b):
    """unroll for a long or unknown T: BlockLSTM over the episode segments, padded to the
    longest, so its cost grows with the padded steps, not with T."""
    steps, cols, width = tf.shape(x)[0], tf.shape(x)[1], tf.shape(x)[2]
    n = w.shape[1] // 4
    h0, c0 = state
    where, first, count, max_len = segments(starts)
    x_cm = tf.reshape(tf.transpose(x, [1, 0, 2]), [steps * cols, -1])
    x_pad = tf.reshape(tf.scatter_nd(where[:, None], x_cm, [max_len * count, width]),
                       [max_len, count, width])
    col, t0 = first // steps, first % steps
    entered = 1.0 - tf.cast(tf.gather_nd(starts, tf.stack([t0, col], 1)), x.dtype)[:, None]
    h_init, c_init = tf.gather(h0, col) * entered, tf.gather(c0, col) * entered
    # every padded step is computed: what BlockLSTM leaves beyond seq_len_max is not zero
    outs = _block_lstm(x_pad, h_init, c_init, w, b, tf.cast(max_len, tf.int64))

    def back(t):  # [max_len, S, H] -> [T, M, H]
        t = tf.gather(tf.reshape(t, [max_len * count, n]), where)
        return tf.transpose(tf.reshape(t, [cols, steps, n]), [1, 0, 2])

    return back(outs[6]), back(outs[1])


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


def _cell(x, h, c, w, b):
    """One LSTMBlockCell step: (i, cs, f, o, ci, co, h)."""
    zeros = tf.zeros([h.shape[-1]], x.dtype)
    return tf.raw_ops.LSTMBlockCell(x=x, cs_prev=c, h_prev=h, w=w, wci=zeros, wcf=zeros,
                                    wco=zeros, b=b, forget_bias=0.0, cell_clip=-1.0,
                                    use_peephole=False)


@tf.custom_gradient
def _masked_lstm(x, keep, h0, c0, w, b):
    """(h, cs) [T, M, H] over a static T, the state entering step t multiplied by keep[t]
    [T, M, 1] (0 where an episode begins). Backward: one fused cell-gradient op and one
    matmul a step; the gate gradients of all steps are stacked and the weight gradient
    is one matmul at the end (BlockLSTM's own gradient adds a step's [F + H, 4H] outer
    product into the total as it goes)."""
    steps, width = x.shape[0], x.shape[-1]
    xs, keeps = tf.unstack(x), tf.unstack(keep)
    h, c, h_in, c_in, outs = h0, c0, [], [], []
    for t in range(steps):
        h, c = h * keeps[t], c * keeps[t]
        h_in.append(h)
        c_in.append(c)
        outs.append(_cell(xs[t], h, c, w, b))
        c, h = outs[-1][1], outs[-1][6]

    def grad(dh, dcs):
        dhs = [None] * steps if dh is None else tf.unstack(dh)
        dcs = [None] * steps if dcs is None else tf.unstack(dcs)
        zeros = tf.zeros([h0.shape[-1]], x.dtype)
        w_ht, w_xt = _transposed(w[width:]), _transposed(w[:width])
        dh_next, dc_next, dz = tf.zeros_like(h0), tf.zeros_like(c0), [None] * steps
        for t in reversed(range(steps)):
            i_t, cs_t, f_t, o_t, ci_t, co_t, _ = outs[t]
            h_grad = dh_next if dhs[t] is None else dhs[t] + dh_next
            c_grad = dc_next if dcs[t] is None else dcs[t] + dc_next
            dc_prev, dz[t], *_ = tf.raw_ops.LSTMBlockCellGrad(
                x=xs[t], cs_prev=c_in[t], h_prev=h_in[t], w=w, wci=zeros, wcf=zeros,
                wco=zeros, b=b, i=i_t, cs=cs_t, f=f_t, o=o_t, ci=ci_t, co=co_t,
                cs_grad=c_grad, h_grad=h_grad, use_peephole=False)
            dh_next, dc_next = tf.matmul(dz[t], w_ht) * keeps[t], dc_prev * keeps[t]
        flat_dz = tf.reshape(tf.stack(dz), [-1, 4 * h0.shape[-1]])
        xh = tf.reshape(tf.concat([x, tf.stack(h_in)], -1), [-1, w.shape[0]])
        dx = tf.reshape(tf.matmul(flat_dz, w_xt), [steps, -1, width])
        return (dx, None, dh_next, dc_next, tf.matmul(xh, flat_dz, transpose_a=True),
                tf.reduce_sum(flat_dz, 0))

    return (tf.stack([o[6] for o in outs]), tf.stack([o[1] for o in outs])), grad
