"""What a user watches: the metric rows (metrics.jsonl and TensorBoard, the same names and
values, step = env steps), the console (live bar on a terminal, plain lines otherwise),
and `dac plot` drawing real runs into a PNG."""

import io
import json
import math

import matplotlib.image
import numpy as np
import pytest
from helpers import tensorboard_scalars, train_quietly

from distributed_ac.commands import main as cli
from distributed_ac.config.schema import Config
from distributed_ac.run.metrics import ConsoleProgress, Interval, MetricsLog, read_rows

NAMES = ["charts/episodic_return", "charts/mean_return_100", "charts/episodic_length",
         "charts/SPS",
         "charts/learning_rate_actor", "charts/learning_rate_critic",
         "losses/actor", "losses/critic", "losses/entropy", "losses/approx_kl", "losses/clipfrac",
         "losses/kl_coef", "diag/explained_variance", "diag/grad_norm_actor", "diag/grad_norm_critic",
         "diag/behaviour_kl", "diag/policy_lag", "diag/policy_lag_p50", "diag/policy_lag_p95",
         "diag/policy_lag_max", "diag/dropped_batches", "diag/worker_restarts"]
CLIP_ONLY = {"losses/approx_kl", "losses/clipfrac"}  # null with policy_loss "pg"
KL_PENALTY_ONLY = {"losses/kl_coef"}  # null unless kl_coef > 0


def short_run(path, seed, policy_loss="pg"):
    cfg = Config(serial=True, num_workers=1, mode="sync", seed=seed, envs_per_worker=8,
                 rollout_length=8, hidden_sizes=(16,), total_env_steps=8 * 64, log_every_s=0.001,
                 policy_loss=policy_loss)
    SUMMARIES[path] = train_quietly(cfg, path)
    return path


SUMMARIES: dict = {}


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("runs")
    return short_run(root / "seed0", 0), short_run(root / "seed1", 1, policy_loss="clip")


def test_each_metrics_row_has_exactly_the_documented_keys(runs):
    rows = read_rows(runs[0] / "metrics.jsonl")
    assert len(rows) >= 4
    for row in rows:
        assert list(row) == ["env_steps", "updates", "wall_s"] + NAMES
        assert all(v is None or isinstance(v, (int, float)) for v in row.values())
    steps = [r["env_steps"] for r in rows]
    assert steps == sorted(steps) and steps[-1] == 8 * 64
    assert [r["updates"] for r in rows] == [s // 64 for s in steps]
    assert any(r["charts/episodic_return"] is not None for r in rows)
    # the 100-episode mean is the one the run's summary and console report, row by row
    means = [r["charts/mean_return_100"] for r in rows if r["charts/mean_return_100"] is not None]
    assert means and means[-1] == pytest.approx(SUMMARIES[runs[0]]["mean_return_100"])
    assert all(r["diag/policy_lag"] == 0 and r["diag/dropped_batches"] == 0 for r in rows)
    assert all(r["charts/learning_rate_actor"] > 0 and r["charts/SPS"] > 0 for r in rows)
    # sync mode: the batch's policy is the learner's, so the behaviour KL is ~0
    assert all(abs(r["diag/behaviour_kl"]) < 1e-6 for r in rows)
    assert all(r[name] is None for r in rows for name in CLIP_ONLY | KL_PENALTY_ONLY)


def test_the_clipped_objective_logs_its_kl_and_clip_fraction(runs):
    rows = read_rows(runs[1] / "metrics.jsonl")
    assert rows and all(list(r) == ["env_steps", "updates", "wall_s"] + NAMES for r in rows)
    kls, fractions = [r["losses/approx_kl"] for r in rows], [r["losses/clipfrac"] for r in rows]
    assert all(k is not None and k >= 0 for k in kls) and max(kls) > 0
    assert all(f is not None and 0 <= f <= 1 for f in fractions)


def test_tensorboard_holds_the_same_scalars_at_env_step_steps(runs):
    rows = read_rows(runs[0] / "metrics.jsonl")
    tb = tensorboard_scalars(runs[0])
    assert {tag for tag, _ in tb} == set(NAMES) - CLIP_ONLY - KL_PENALTY_ONLY
    for row in rows:
        for name in NAMES:
            if row[name] is None:
                assert (name, row["env_steps"]) not in tb
            else:
                assert tb[(name, row["env_steps"])] == pytest.approx(row[name], rel=1e-6)


def test_an_interval_averages_updates_and_episodes_since_the_last_row(tmp_path):
    interval = Interval()
    assert interval.empty
    m = {"actor_loss": 1.0, "critic_loss": 2.0, "entropy": 0.5, "explained_variance": 0.1,
         "grad_norm_actor": 1.0, "grad_norm_critic": 3.0, "learning_rate_actor": 1e-3,
         "learning_rate_critic": 2e-3}
    interval.add_update(m)
    interval.add_lags([0, 2])
    interval.add_update({**m, "actor_loss": 3.0, "critic_loss": math.nan})
    interval.add_lags([4] + [1] * 17)  # 20 lags: 0, 2, 4 and seventeen 1s
    row = interval.scalars(sps=100.0, dropped_batches=1, worker_restarts=2)
    assert row["losses/actor"] == 2.0 and row["diag/policy_lag"] == 23 / 20
    assert row["diag/policy_lag_p50"] == 1.0 and row["diag/policy_lag_max"] == 4.0
    assert row["diag/policy_lag_p95"] == np.percentile([0, 2, 4] + [1] * 17, 95)
    assert row["charts/episodic_return"] is None  # no episode ended in this interval
    log = MetricsLog(tmp_path / "tb", tmp_path / "m.jsonl")
    written = log.write(env_steps=64, updates=2, wall_s=1.5, scalars=row)
    log.close()
    assert written["losses/critic"] is None  # NaN is not JSON: null instead
    assert json.loads((tmp_path / "m.jsonl").read_text()) == written


def test_console_is_a_live_bar_on_a_terminal_and_plain_lines_otherwise():
    class Terminal(io.StringIO):
        def isatty(self):
            return True

    live = ConsoleProgress(1000, 1.0, Terminal(), start=400)
    assert live.live and live._bar.tasks[0].completed == 400  # a resumed run starts there
    live.update(500, 250.0, 21.5)
    live.close()
    assert "500/1000" in live.console.file.getvalue()

    plain = ConsoleProgress(1000, 1.0, io.StringIO())
    plain.update(500, 250.0, 21.5, force=True)
    assert not plain.live
    assert plain.console.file.getvalue().strip() == (
        "env_steps        500/1,000  steps/s       250  mean_return(100)    21.50")


def test_dac_plot_draws_every_run_on_one_png(runs, tmp_path, capsys):
    out = tmp_path / "curve.png"
    assert cli.main(["plot", str(runs[0]), str(runs[1]), "--out", str(out)]) == 0
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert result["runs"] == [str(r) for r in runs] and min(result["points"].values()) >= 1
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    image = matplotlib.image.imread(out)[..., :3]
    assert image.shape[:2] == (450, 1200)
    for colour in ("#1f77b4", "#ff7f0e"):  # the first two runs' line colours
        rgb = np.array([int(colour[i:i + 2], 16) for i in (1, 3, 5)]) / 255
        assert (np.abs(image - rgb).max(axis=-1) < 0.02).sum() > 20, colour


def test_dac_plot_refuses_runs_without_metrics_and_unknown_formats(runs, tmp_path, capsys):
    (tmp_path / "config.yaml").write_text("seed: 1\n")
    assert cli.main(["plot", str(tmp_path), "--out", str(tmp_path / "c.png")]) == 2
    assert "has no metrics.jsonl" in capsys.readouterr().err
    assert cli.main(["plot", str(runs[0]), "--out", str(tmp_path / "c.bmpx")]) == 2
    assert ".png, .svg or .pdf" in capsys.readouterr().err
    assert cli.main(["plot", "--out", str(tmp_path / "c.png")]) == 2
    assert "at least one run directory" in capsys.readouterr().err
    assert not (tmp_path / "c.png").exists()
