"""The fused LSTM unroll (models/fused_lstm.py) against the step-by-step one: the same
outputs, final and entering states, and gradients with respect to the inputs, the stored
state and every weight, on rollouts whose columns hold several episodes (starts at the
first step, back to back, and none at all); its outputs also against the workers' NumPy
twin, stepped by hand."""

import numpy as np
import pytest
import tensorflow as tf

from distributed_ac.models import fused_lstm
from distributed_ac.models.cores import RecurrentCore as NumpyCore
from distributed_ac.models.keras_cores import RecurrentCore

T, M, F, H = 12, 5, 6, 8


def rollout(seed: int):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(T, M, F)).astype(np.float32)
    state = tuple(rng.normal(size=(M, H)).astype(np.float32) for _ in range(2))
    starts = rng.random((T, M)) < 0.25
    starts[:, 0] = False  # one column a single segment from the stored state
    starts[0, 1] = True  # one entered at an episode's first step
    starts[3:6, 2] = True  # episodes of one step, back to back
    starts[-1, 3] = True  # one begun at the last step
    return x, state, starts.astype(np.float32)


def cores():
    fused = RecurrentCore("lstm", H, seed=5)
    loop = RecurrentCore("lstm", H, seed=5, fused=False)
    for core in (fused, loop):
        core.build((None, F))
    for v in fused.bundle_variables:  # non-trivial biases, the same in both
        v.assign(v + tf.random.stateless_normal(v.shape, [1, 2]) * 0.3)
    for a, b in zip(loop.bundle_variables, fused.bundle_variables):
        a.assign(b)
    assert fused.fused and not loop.fused
    return fused, loop


def grads(core, x, state, starts):
    x, state = tf.constant(x), tuple(tf.constant(s) for s in state)
    with tf.GradientTape() as tape:
        tape.watch([x, *state])
        out, final = core(x, state, starts)
        w = tf.range(1.0, H + 1.0) / H  # a loss that reads every output and the final state
        loss = tf.reduce_sum(tf.sin(out) * w) + tf.reduce_sum(final[0] * final[1])
    g = tape.gradient(loss, [x, *state, *core.bundle_variables])
    return out, final, [tf.convert_to_tensor(t) for t in g]  # a gather's are IndexedSlices


@pytest.mark.parametrize("static_unroll", [True, False])
@pytest.mark.parametrize("seed,whole_column", [(0, True), (1, True), (2, False), (5, False)])
def test_fused_unroll_matches_the_step_by_step_one_forward_and_backward(
        seed, whole_column, static_unroll, monkeypatch):
    """Both backwards: the hand-written one (a chunk, T <= STATIC_UNROLL_MAX) and
    BlockLSTM's own over segments padded to the longest (a long rollout)."""
    monkeypatch.setattr(fused_lstm, "STATIC_UNROLL_MAX", T if static_unroll else T - 1)
    fused, loop = cores()
    x, state, starts = rollout(seed)
    if not whole_column:  # every segment shorter than T: the padding is read too
        starts[T // 2, 0] = 1.0
    out_f, final_f, g_f = grads(fused, x, state, starts)
    out_l, final_l, g_l = grads(loop, x, state, starts)
    np.testing.assert_allclose(out_f, out_l, atol=1e-5)
    for a, b in zip(final_f, final_l):
        np.testing.assert_allclose(a, b, atol=1e-5)
    for a, b in zip(g_f, g_l):
        np.testing.assert_allclose(a, b, atol=1e-4, rtol=1e-4)
    for a, b in zip(fused.entering_states(tf.constant(x), state, starts),
                    loop.entering_states(tf.constant(x), state, starts)):
        np.testing.assert_allclose(a, b, atol=1e-5)


def test_fused_unroll_matches_the_numpy_twin_stepped_by_hand():
    fused, _ = cores()
    x, state, starts = rollout(3)
    twin = NumpyCore("lstm", H)
    twin.load([v.numpy() for v in fused.bundle_variables])
    s, outs = state, []
    for t in range(T):
        out, s = twin.step(x[t], s, starts[t].astype(bool))
        outs.append(out)
    h, c = fused_lstm.unroll(tf.constant(x), state, starts, *fused.bundle_variables)
    np.testing.assert_allclose(h, np.stack(outs), atol=1e-5)
    np.testing.assert_allclose(c[-1], s[1], atol=1e-5)


def test_segments_cut_each_column_where_an_episode_begins():
    starts = np.zeros((4, 2), np.float32)
    starts[2, 0] = starts[0, 1] = starts[1, 1] = 1.0
    where, first, count, max_len = fused_lstm.segments(tf.constant(starts))
    # column 0: steps 0-1 and 2-3; column 1: step 0, then steps 1-3
    assert int(count) == 4 and int(max_len) == 3
    np.testing.assert_array_equal(first, [0, 2, 4, 5])
    offsets, segs = np.asarray(where) // 4, np.asarray(where) % 4
    np.testing.assert_array_equal(segs, [0, 0, 1, 1, 2, 3, 3, 3])
    np.testing.assert_array_equal(offsets, [0, 1, 0, 1, 0, 0, 1, 2])


def test_a_rollout_of_unknown_length_unrolls_in_a_traced_function():
    fused, loop = cores()
    x, state, starts = rollout(4)
    spec = tf.TensorSpec([None, M, F])
    run = tf.function(lambda x: fused(x, state, starts)[0], input_signature=[spec])
    np.testing.assert_allclose(run(tf.constant(x)), loop(x, state, starts)[0], atol=1e-5)
