"""The driver loop (train.Trainer) over a scripted pool and a real Learner, without Ray.

The pool (tests/scripted_pool.py) hands out batches made by the weights each worker was
last given, in an order the test writes down, so lag, drops and resubmission are exact
and can be asserted."""

import numpy as np
import pytest
from scripted_pool import N, T, OverlapProbe, ScriptedPool, run_loop, run_overlapped

from distributed_ac.core.errors import NonFiniteLossError
from distributed_ac.training.signals import StopSignals


def test_an_async_update_trains_on_b_batches_and_each_worker_is_resubmitted_on_arrival(tmp_path):
    pool = ScriptedPool(4, order=[0, 1, 2, 3])
    trainer = run_loop(tmp_path, pool, mode="async", batches_per_update=2,
                       total_env_steps=6 * 2 * T * N)
    assert trainer.state.counters.updates == 6 and trainer.per_update == 2
    assert trainer.state.counters.env_steps == 6 * 2 * T * N and trainer.state.counters.batches == 12
    waits = [e for e in pool.log if e[0] == "wait"]
    assert [w[1] for w in waits] == [2] * 6
    # every wait hands arriving workers the newest published version, at once
    published = [e[1] for e in pool.log if e[0] == "publish"]
    assert [w[2] for w in waits] == published[:6]
    for i, entry in enumerate(pool.log):
        if entry[0] == "wait":  # the next submits are the two arrivals, with that version
            assert [e[2] for e in pool.log[i + 1:i + 3]] == [entry[2]] * 2


def test_batches_older_than_max_policy_lag_are_dropped_and_counted_but_their_episodes_count(tmp_path):
    # Workers 0-2 come back 3 updates after they were sent out (lag 3); worker 3 only
    # at every 8th delivery, 7 or more versions old.
    order = [0, 1, 2, 0, 1, 2, 0, 3]
    pool = ScriptedPool(4, order=order)
    trainer = run_loop(tmp_path, pool, mode="async", batches_per_update=1, max_policy_lag=4,
                       total_env_steps=20 * T * N)
    c = trainer.state.counters
    assert c.dropped_batches == 2 and c.nonfinite_batches == 0  # worker 3's, twice
    assert c.max_lag >= 7
    assert c.batches == c.updates + c.dropped_batches  # every batch: trained on, or dropped
    assert c.env_steps == c.updates * T * N  # dropped steps are not trained steps
    # one episode per batch, used or dropped
    assert trainer.state.stats.episodes == c.batches


def test_a_nonfinite_batch_is_dropped_and_counted_as_nonfinite_not_trained_on(tmp_path):
    pool = ScriptedPool(2, order=[0, 1], poison={1, 4})
    trainer = run_loop(tmp_path, pool, mode="async", batches_per_update=2,
                       total_env_steps=4 * 2 * T * N)
    c = trainer.state.counters
    assert c.nonfinite_batches == 2 and c.dropped_batches == 2
    # the two updates with a poisoned batch trained on the other batch alone
    assert c.env_steps == 4 * 2 * T * N and c.updates == 5


def test_an_update_skipped_for_a_nonfinite_loss_counts_no_update_no_steps_and_no_nan(tmp_path):
    """The learner skips an update whose loss is NaN; it used to count as an update and
    its env steps anyway, and its NaN losses blanked the averages of the row."""
    pool = ScriptedPool(1, order=[0], nan_rewards={2})
    trainer = run_loop(tmp_path, pool, mode="async", total_env_steps=4 * T * N)
    c = trainer.state.counters
    assert trainer.learner.skipped_updates == 1
    assert c.batches == 5 and c.updates == 4 and c.env_steps == 4 * T * N
    row = trainer.interval.scalars(sps=1.0, dropped_batches=0, worker_restarts=0)
    assert all(np.isfinite(row[k]) for k in ("losses/actor", "losses/critic", "losses/entropy"))


def test_sync_mode_waits_for_every_worker_and_resubmits_all_with_the_new_weights(tmp_path):
    pool = ScriptedPool(3, order=[2, 0, 1])
    trainer = run_loop(tmp_path, pool, mode="sync", total_env_steps=4 * 3 * T * N)
    assert trainer.per_update == 3 and trainer.state.counters.updates == 4
    assert trainer.state.counters.max_lag == 0  # on-policy: every batch by the newest weights
    waits = [e for e in pool.log if e[0] == "wait"]
    assert waits == [("wait", 3, None)] * 4
    # after each update, all three workers get the version it published
    for v in range(1, 4):
        assert sorted(e[1] for e in pool.log if e[0] == "submit" and e[2] == v) == [0, 1, 2]


def test_with_every_worker_in_each_update_every_batch_is_exactly_one_version_old(tmp_path):
    """Async, B = W: one batch per worker per update, whatever order they arrive in, and
    every worker is handed the newest weights before the learner steps, so it samples
    while the learner trains and its next batch is one version old, as with one worker."""
    pool = ScriptedPool(3, order=[2, 0, 1, 1, 2, 0, 0, 1, 2])
    trainer = run_loop(tmp_path, pool, mode="async", total_env_steps=6 * 3 * T * N)
    assert trainer.per_update == 3 and trainer.state.counters.updates == 6
    assert trainer.lags == {0: 3, 1: 15}  # the first update's three batches, then lag 1
    waits = [e for e in pool.log if e[0] == "wait"]
    assert waits == [("wait", 3, None)] * 6  # no worker resubmitted mid-wait
    for i, entry in enumerate(pool.log):
        if entry[0] == "wait":  # then all three, with the version the coming step trains
            submits = pool.log[i + 1:i + 4]
            published = [e[1] for e in pool.log[:i] if e[0] == "publish"][-1]
            assert sorted(e[1] for e in submits) == [0, 1, 2]
            assert {e[2] for e in submits} == {published}


@pytest.mark.parametrize("mode", ["async", "sync"])
def test_with_every_worker_in_each_update_batches_join_in_worker_order_whatever_arrives_first(
        tmp_path, mode):
    """The learner batch's columns do not depend on which worker finished first, so a
    seed repeats a sync run, or an async one at W <= num_envs (the clipped surrogate's
    minibatches are positions in the batch)."""
    pool = ScriptedPool(3, order=[2, 0, 1, 1, 2, 0, 0, 1, 2])
    joined = []

    def watch(trainer):
        step = trainer.learner.step
        trainer.learner.step = lambda b: (joined.append(b.episode_returns.tolist()), step(b))[1]

    run_loop(tmp_path, pool, watch, mode=mode, total_env_steps=3 * 3 * T * N)
    assert joined == [[0.0, 1.0, 2.0]] * 3  # each batch's episodes name its worker


# --- the learner thread (async on Ray): step k runs while the driver gathers k+1 -------------


def test_the_learner_thread_steps_while_the_driver_waits_for_the_next_batches(tmp_path):
    pool = OverlapProbe(2, order=[0, 1])
    trainer, on_main = run_overlapped(tmp_path, pool, batches_per_update=1,
                                      total_env_steps=5 * T * N)
    c = trainer.state.counters
    assert c.updates == 5 and c.env_steps == 5 * T * N and c.batches == 5
    assert on_main == [False] * 5  # every step ran off the driver's thread
    assert pool.overlapped == [False, True, True, True, True]  # the first wait has no step to overlap


def test_with_the_learner_thread_a_worker_arriving_mid_step_gets_that_steps_weights(tmp_path):
    pool = ScriptedPool(4, order=[0, 1, 2, 3])
    trainer, _ = run_overlapped(tmp_path, pool, batches_per_update=2,
                                total_env_steps=6 * 2 * T * N)
    c = trainer.state.counters
    assert c.updates == 6 and c.env_steps == 6 * 2 * T * N and c.batches == 12  # no overshoot
    published = [e[1] for e in pool.log if e[0] == "publish"]
    assert published == list(range(7))  # v0, then one per landed update
    waits = [e for e in pool.log if e[0] == "wait"]
    assert [w[2] for w in waits] == [0] + [None] * 5  # mid-step arrivals are held ...
    for i, entry in enumerate(pool.log):  # ... and submitted right after the step's publish
        if entry[0] == "publish" and entry[1] >= 1 and i + 1 < len(pool.log):
            assert [e[:1] + e[2:] for e in pool.log[i + 1:i + 3]] == [("submit", entry[1])] * 2
    # so batches lag exactly as much as without the thread
    classic = run_loop(tmp_path / "b", ScriptedPool(4, order=[0, 1, 2, 3]), mode="async",
                       batches_per_update=2, total_env_steps=6 * 2 * T * N)
    assert c.max_lag == classic.state.counters.max_lag


def test_with_the_learner_thread_a_failing_step_stops_the_run_on_the_driver(tmp_path):
    pool = ScriptedPool(2, order=[0, 1], nan_rewards={1, 2})
    with pytest.raises(NonFiniteLossError):
        run_overlapped(tmp_path, pool, max_nonfinite_updates=2, batches_per_update=1,
                       total_env_steps=10 * T * N)


def test_with_the_learner_thread_a_nonfinite_loss_skips_only_that_update(tmp_path):
    pool = ScriptedPool(2, order=[0, 1], nan_rewards={2})
    trainer, _ = run_overlapped(tmp_path, pool, batches_per_update=1, total_env_steps=4 * T * N)
    c = trainer.state.counters
    assert trainer.learner.skipped_updates == 1
    assert c.batches == 5 and c.updates == 4 and c.env_steps == 4 * T * N


def test_the_learner_thread_is_not_used_when_every_worker_joins_each_update(tmp_path):
    """B = W: the workers already sample while the learner trains, and a thread would let
    a fast worker deliver twice in one update (lag 2 for a slow one)."""
    trainer, on_main = run_overlapped(tmp_path, ScriptedPool(2, order=[0, 1]),
                                      total_env_steps=3 * 2 * T * N)
    assert not trainer.overlap and on_main == [True] * 3


def test_the_summary_of_a_run_that_finished_no_episode_is_strict_json_with_a_null_mean(tmp_path):
    import json

    trainer = run_loop(tmp_path, ScriptedPool(1, order=[0], episodes_per_batch=0), mode="async",
                       total_env_steps=2 * T * N)
    line = json.dumps(trainer.summary(1.0, StopSignals()))
    summary = json.loads(line, parse_constant=lambda c: pytest.fail(f"{c} is not JSON"))
    assert summary["episodes"] == 0 and summary["mean_return_100"] is None
