"""Evaluation during training (--eval-every): rows of K episodes' statistics in
metrics.jsonl, TensorBoard and the summary; the best evaluation's networks kept as best/,
which `dac evaluate --best` scores alike and `dac export --best` serves; one evaluation
in flight at a time, never waited for by the loop; training untouched by it (serial
mode, bit for bit); the best kept across a resume."""

import json
from functools import partial

import numpy as np
import pytest
from checkpoints import checkpoint_tensors
from failed_runs import crash_report
from helpers import dac_with_tests, tensorboard_scalars, train_updates
from scripted_pool import ScriptedPool, run_loop, run_overlapped

from distributed_ac.trained.evaluate import evaluate
from distributed_ac.trained.load import load_trained
from distributed_ac.run.metrics import EVAL_SCALARS, read_rows

BATCH = 4 * 8  # envs_per_worker x rollout_length
BASE = dict(serial=True, num_workers=1, mode="sync", seed=3, envs_per_worker=4,
            rollout_length=8, hidden_sizes=(16,), checkpoint_every=4, log_every_s=0.001,
            actor_lr_decay_steps=5, critic_lr_decay_steps=5, entropy_coef=0.01)
# run(run_dir, updates, resume=False, **fields): BASE for `updates` batches, quiet
run = partial(train_updates, BASE)


def eval_rows(run_dir) -> list[dict]:
    return [r for r in read_rows(run_dir / "metrics.jsonl") if "eval/mean_return" in r]


def test_a_serial_run_logs_k_episode_rows_and_keeps_a_best_checkpoint_that_scores_alike(
        tmp_path):
    summary = run(tmp_path / "run", 12, eval_every=3, eval_episodes=4)
    rows = eval_rows(tmp_path / "run")
    assert rows and summary["evaluations"] == len(rows)
    for row in rows:
        assert row["eval/episodes"] == 4 and all(row[k] is not None for k in EVAL_SCALARS)
        # the row is the evaluated weights' update, on the grid (or the final weights)
        assert row["updates"] % 3 == 0 and row["env_steps"] == row["updates"] * BATCH
        assert row["eval/done_at_updates"] >= row["updates"]
    assert rows[-1]["updates"] == 12  # the run's final weights are evaluated at its end
    tb = tensorboard_scalars(tmp_path / "run")
    for row in rows:
        for name in EVAL_SCALARS:
            assert tb[(name, row["env_steps"])] == pytest.approx(row[name])
    best = json.loads((tmp_path / "run" / "best" / "best.json").read_text())
    assert best["mean_return"] == max(r["eval/mean_return"] for r in rows)
    assert summary["eval_best_mean_return"] == best["mean_return"]
    assert summary["eval_mean_return"] == rows[-1]["eval/mean_return"]
    # the kept networks are those that evaluation scored: dac evaluate plays the same seeds
    again = evaluate(tmp_path / "run", episodes=4, deterministic=True, best=True)
    assert again["mean"] == best["mean_return"]
    assert again["env_steps_trained"] == best["env_steps"]
    assert again["checkpoint"] == summary["best_checkpoint"]


def test_serial_training_with_evaluation_on_is_bit_identical_to_it_off(tmp_path):
    off = run(tmp_path / "off", 8)
    on = run(tmp_path / "on", 8, eval_every=BATCH, eval_every_unit="env_steps", eval_episodes=2)
    assert on["evaluations"] >= 2 and "evaluations" not in off
    a, b = checkpoint_tensors(off), checkpoint_tensors(on)
    assert a.keys() == b.keys()
    for name in a:
        assert np.array_equal(a[name], b[name]), name
    with np.load(off["checkpoint"] + ".workers.npz") as x, \
            np.load(on["checkpoint"] + ".workers.npz") as y:  # every action the workers took
        assert x.keys() == y.keys() and all(np.array_equal(x[k], y[k]) for k in x)
    losses = [[r["losses/actor"] for r in read_rows(d / "metrics.jsonl")
               if r.get("losses/actor") is not None] for d in (tmp_path / "off", tmp_path / "on")]
    assert sum(losses[0]) == sum(losses[1])


def test_the_best_evaluation_survives_a_resume(tmp_path):
    path = tmp_path / "run"
    run(path, 4, eval_every=2, eval_episodes=2)
    record = path / "best" / "best.json"
    best = {**json.loads(record.read_text()), "mean_return": 1e9}  # nothing can beat it
    record.write_text(json.dumps(best))
    kept = sorted(p.name for p in (path / "best").iterdir())
    resumed = run(path, 8, resume=True, eval_every=2, eval_episodes=2)
    assert any(r["updates"] > 4 for r in eval_rows(path))  # evaluations went on
    assert json.loads(record.read_text()) == best
    assert sorted(p.name for p in (path / "best").iterdir()) == kept
    assert resumed["eval_best_mean_return"] == 1e9


def test_export_best_serves_the_best_evaluations_networks_not_the_newest(tmp_path, capsys):
    import tensorflow as tf

    from distributed_ac.acting.numpy_policy import Policy
    from distributed_ac.commands.main import main

    path = tmp_path / "run"
    run(path, 4, eval_every=2, eval_episodes=2)
    record = path / "best" / "best.json"  # nothing can beat it: best/ stays at update <= 4
    record.write_text(json.dumps({**json.loads(record.read_text()), "mean_return": 1e9}))
    run(path, 8, resume=True, eval_every=2, eval_episodes=2)
    code = main(["export", str(path), "--best", "--out", str(tmp_path / "policy")])
    out = capsys.readouterr()
    assert code == 0, out.err
    _, space, best, best_path = load_trained(path, best=True)
    assert json.loads(out.out.splitlines()[-1])["checkpoint"] == best_path
    model = tf.saved_model.load(str(tmp_path / "policy"))
    obs = np.random.default_rng(0).normal(size=(64, space.obs_dim)).astype(np.float32)
    policy = Policy(space, best.spec)
    policy.load(best.weights())
    _, expected, _ = policy.act(obs, np.random.default_rng(0), deterministic=True)
    np.testing.assert_array_equal(model.action(obs).numpy(), expected)
    values = model.value(obs).numpy()
    np.testing.assert_allclose(values, best.nets.critic(obs).numpy()[:, 0], rtol=1e-5, atol=1e-5)
    newest = load_trained(path)[2]  # four updates on from the best: another critic
    assert np.abs(values - newest.nets.critic(obs).numpy()[:, 0]).max() > 1e-3


class HeldEvaluation:
    """pool.Evaluation that finishes once the driver has looked HOLD_POLLS times (once an
    update); the first evaluation scores best (mean 2), the later ones 1 less each time."""

    HOLD_POLLS = 3

    def __init__(self):
        self.started: list[int] = []  # the weights' version of each evaluation
        self.polls = None
        self.finished = 0

    def start(self, weights, episodes, deterministic):
        assert self.polls is None, "a second evaluation while one is in flight"
        self.started.append(weights.version)
        self.polls = 0

    def result(self):
        if self.polls is None:
            return None
        self.polls += 1
        return self.wait() if self.polls >= self.HOLD_POLLS else None

    def wait(self):
        if self.polls is None:
            return None
        self.polls = None
        self.finished += 1
        drop = self.finished - 1.0
        return {"returns": [1.0 - drop, 3.0 - drop], "lengths": [10, 30]}

    def close(self):
        pass


class PoolWithHeldEvaluation(ScriptedPool):
    published: dict = {}

    def publish(self, weights):
        self.published = {**self.published, weights.version: weights}
        return super().publish(weights)

    def evaluation(self):
        self.held = HeldEvaluation()
        return self.held


def test_one_evaluation_at_a_time_the_loop_trains_on_and_the_best_keeps_the_weights_it_scored(
        tmp_path):
    pool = PoolWithHeldEvaluation(1, order=[0])
    trainer = run_loop(tmp_path, pool, mode="async", eval_every=1, eval_episodes=2,
                       total_env_steps=12 * 4 * 2)
    assert trainer.state.counters.updates == 12
    # due at every update, but each holds for 3 updates: 1, then the update it ends at, ...
    assert pool.held.started == [1, 4, 7, 10]
    rows = eval_rows(tmp_path / "run")
    assert [(r["updates"], r["eval/done_at_updates"]) for r in rows] == [
        (1, 4), (4, 7), (7, 10)]  # the loop trained on while each was under way
    assert rows[0]["eval/mean_return"] == 2.0 and rows[0]["eval/std_return"] == 1.0
    assert rows[0]["eval/mean_length"] == 20.0
    # the best (the first) keeps the networks of update 1, not those of update 4, when it ended
    assert_best_holds(tmp_path / "run", pool, 1, not_those_of=4)


def assert_best_holds(run_dir, pool, version: int, not_those_of: int) -> None:
    """The run's best/ holds the networks published as `version` (and not those of another)."""
    best = json.loads((run_dir / "best" / "best.json").read_text())
    assert best["updates"] == version
    kept = load_trained(run_dir, best=True)[2].weights().parts
    at = {v: pool.published[v].parts for v in (version, not_those_of)}
    assert kept.keys() == at[version].keys() and "actor.head" in kept
    assert all(np.array_equal(a, b) for k in kept for a, b in zip(kept[k], at[version][k]))
    assert not all(np.array_equal(a, b) for k in kept for a, b in zip(kept[k], at[not_those_of][k]))


def test_with_the_learner_thread_an_evaluation_copies_the_networks_between_steps(tmp_path):
    """The copy is taken where an update lands, before the next step starts on its thread:
    taken while a step ran, it would hold some of the next version's values."""
    pool = PoolWithHeldEvaluation(2, order=[0, 1])
    trainer, on_main = run_overlapped(tmp_path, pool, batches_per_update=1, eval_every=1,
                                      eval_episodes=2, total_env_steps=8 * 4 * 2)
    assert trainer.overlap and on_main == [False] * 8
    assert pool.held.started == [1, 4, 7]
    assert_best_holds(tmp_path / "run", pool, 1, not_those_of=2)


def test_a_ray_evaluation_under_way_does_not_hold_up_the_updates(tmp_path):
    """Each evaluation sleeps 0.2 s a step (fakes.SlowToEvaluate): with the loop waiting
    for it, no update could land between an evaluation's start and its row."""
    out = dac_with_tests(
        "train", "--env", "fakes:SlowToEvaluate", "--no-preset", "--num-workers", "1",
        "--num-envs", "4", "--rollout-length", "8", "--hidden-sizes", "8",
        "--total-env-steps", str(120 * BATCH), "--eval-every", "5", "--eval-episodes", "2",
        "--run-dir", str(tmp_path / "run"), timeout=600)
    assert out.returncode == 0, crash_report(out)
    summary = json.loads(out.stdout.strip().splitlines()[-1])
    rows = eval_rows(tmp_path / "run")
    assert summary["updates"] == 120 and summary["evaluations"] == len(rows) >= 2
    for row in rows:
        assert row["eval/episodes"] == 2 and row["eval/mean_length"] == 5.0
    assert any(r["eval/done_at_updates"] > r["updates"] for r in rows)
    spans = sorted((r["updates"], r["eval/done_at_updates"]) for r in rows)
    for (_, done), (start, _) in zip(spans, spans[1:]):
        assert start >= done  # one at a time: the next starts once the last has ended
    assert (tmp_path / "run" / "best" / "best.json").is_file()
