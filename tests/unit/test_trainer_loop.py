"""The driver loop (train.Trainer) over a scripted pool and a real Learner, without Ray.

The pool hands out batches made by the weights each worker was last given, in an order
the test writes down, so lag, drops and resubmission are exact and can be asserted."""

import io
import threading

import numpy as np
import pytest

from distributed_ac.config.plan import make_plan
from distributed_ac.config.schema import Config
from distributed_ac.core.batch import Batch, Weights
from distributed_ac.core.errors import NonFiniteLossError
from distributed_ac.envs.vector import probe_space
from distributed_ac.run import rundir
from distributed_ac.run.metrics import ConsoleProgress
from distributed_ac.training.signals import StopSignals
from distributed_ac.training.trainer import Trainer

T, N = 4, 2  # each worker batch: [T, N]


class ScriptedPool:
    """A Pool whose workers deliver in `order` (worker ids, cycled); `poison` lists the
    deliveries (0-based) whose batch carries a non-finite flag."""

    def __init__(self, workers: int, order: list[int], poison=(), episodes_per_batch=1,
                 nan_rewards=()):
        self.n, self.order, self.poison = workers, list(order), set(poison)
        self.nan_rewards = set(nan_rewards)  # deliveries with NaN rewards the worker missed
        self.episodes_per_batch = episodes_per_batch
        self.holding: dict[int, Weights] = {}  # worker -> weights of its collect in flight
        self.log: list[tuple] = []  # ("publish", version) / ("submit", w, v) / ("wait", num, ...)
        self.deliveries = 0
        self.restarts = 0

    def __len__(self):
        return self.n

    def placement(self):
        return []

    def learner_node(self):
        return "test"

    def publish(self, weights):
        self.log.append(("publish", weights.version))
        return weights

    def submit(self, worker, weights):
        assert worker not in self.holding, f"worker {worker} got a second collect in flight"
        self.holding[worker] = weights
        self.log.append(("submit", worker, weights.version))

    def wait(self, num, resubmit=None):
        self.log.append(("wait", num, None if resubmit is None else resubmit.version))
        out = []
        while len(out) < num:
            worker = self.order[self.deliveries % len(self.order)]
            out.append(self._batch(worker, self.holding.pop(worker)))
            self.deliveries += 1
            if resubmit is not None:
                self.submit(worker, resubmit)
        return out

    def _batch(self, worker, weights):
        rng = np.random.default_rng(self.deliveries)
        f32 = np.float32
        zeros = np.zeros((T, N), f32)
        return Batch(obs=rng.standard_normal((T, N, 4)).astype(f32),
                     actions=rng.integers(0, 2, (T, N)).astype(np.int32),
                     rewards=np.full((T, N), np.nan if self.deliveries in self.nan_rewards
                                     else 1.0, f32), terminated=zeros, truncated=zeros,
                     mask=np.ones((T, N), f32), behaviour_logp=np.full((T, N), -0.69, f32),
                     values=np.zeros((T + 1, N), f32), policy_version=weights.version,
                     target_version=weights.target_version, worker_id=worker,
                     episode_returns=np.full(self.episodes_per_batch, float(worker)),
                     episode_lengths=np.full(self.episodes_per_batch, 10, np.int64),
                     episode_ends=np.zeros(self.episodes_per_batch, np.int64),
                     nonfinite="NaN reward" if self.deliveries in self.poison else "")

    def idle(self):
        return [w for w in range(self.n) if w not in self.holding]

    def save_state(self):
        return None

    def resume(self, saved, draw_seeds):
        pass

    def close(self):
        pass


def run_loop(tmp_path, pool, **cfg_fields):
    # the driver-thread loop unless a test asks for the learner thread (tests further down)
    cfg = Config(**{"envs_per_worker": N, "rollout_length": T, "hidden_sizes": (8,),
                    "log_every_s": 1e9, "checkpoint_every": 10**6, "learner_thread": False,
                    **cfg_fields})
    space = probe_space(cfg.env, cfg.vectorization)
    run = rundir.new_run(tmp_path / "run", cfg)
    pool.plan = make_plan(cfg, pool.n)
    progress = ConsoleProgress(cfg.total_env_steps, 1e9, stream=io.StringIO())
    with Trainer(cfg, run, pool, space, False, progress) as trainer:
        trainer.loop(StopSignals())
    return trainer


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
    cfg = Config(envs_per_worker=N, rollout_length=T, hidden_sizes=(8,), log_every_s=1e9,
                 checkpoint_every=10**6, learner_thread=False, mode=mode,
                 total_env_steps=3 * 3 * T * N)
    run = rundir.new_run(tmp_path / "run", cfg)
    pool.plan = make_plan(cfg, pool.n)
    progress = ConsoleProgress(cfg.total_env_steps, 1e9, stream=io.StringIO())
    joined = []
    with Trainer(cfg, run, pool, probe_space(cfg.env), False, progress) as trainer:
        step = trainer.learner.step
        trainer.learner.step = lambda b: (joined.append(b.episode_returns.tolist()), step(b))[1]
        trainer.loop(StopSignals())
    assert joined == [[0.0, 1.0, 2.0]] * 3  # each batch's episodes name its worker


# --- the learner thread (async on Ray): step k runs while the driver gathers k+1 -------------


class OverlapProbe(ScriptedPool):
    """Records, at each wait, whether a learner step was under way on another thread.

    A handshake, not a clock: a step says it has begun (`in_step`) and then holds until
    a wait has seen it (`seen`), so a step that overlaps the driver's next wait is seen
    however late the driver gets there. A wait with no step under way waits for one to
    begin for up to PATIENCE_S and records False; that time is spent only when the
    steps do not overlap the waits (then each step also holds PATIENCE_S in vain)."""

    PATIENCE_S = 10.0

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.in_step = threading.Event()
        self.seen = threading.Event()
        self.overlapped: list[bool] = []

    def wait(self, num, resubmit=None):
        running = False
        if self.deliveries:  # the first wait has no step to overlap
            running = self.in_step.wait(self.PATIENCE_S)
            if running:
                self.seen.set()
        self.overlapped.append(running)
        return super().wait(num, resubmit)

    def step_begins(self, wait_to_be_seen: bool):
        """Run by each learner step before it computes: announce the step and, unless no
        wait can come while it runs, hold until one has seen it."""
        self.in_step.set()
        if wait_to_be_seen:
            self.seen.wait(self.PATIENCE_S)
        self.seen.clear()
        self.in_step.clear()


def run_overlapped(tmp_path, pool, **cfg_fields):
    """run_loop with learner_thread; an OverlapProbe pool watches each learner step."""
    cfg = Config(envs_per_worker=N, rollout_length=T, hidden_sizes=(8,), log_every_s=1e9,
                 checkpoint_every=10**6, mode="async", learner_thread=True, **cfg_fields)
    space = probe_space(cfg.env, cfg.vectorization)
    run = rundir.new_run(tmp_path / "run", cfg)
    pool.plan = make_plan(cfg, pool.n)
    progress = ConsoleProgress(cfg.total_env_steps, 1e9, stream=io.StringIO())
    with Trainer(cfg, run, pool, space, False, progress) as trainer:
        step, threads, stepped = trainer.learner.step, [], [0]

        def watched_step(batch):
            on_main = threading.current_thread() is threading.main_thread()
            threads.append(on_main)
            stepped[0] += batch.env_steps
            if isinstance(pool, OverlapProbe):
                # No wait comes while the main thread itself steps, nor after the step
                # that completes the budget (the loop ends): those need not be seen.
                pool.step_begins(not on_main and stepped[0] < cfg.total_env_steps)
            return step(batch)

        trainer.learner.step = watched_step
        trainer.loop(StopSignals())
    return trainer, threads


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
