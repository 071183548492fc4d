"""`dac bench`: the JSON line schema, --compare ratios, the sweep -> table/PNG/JSONL path
on a tiny config, the pipeline efficiency, and the benchmark scripts. Speed is never
asserted."""

import json
import os

import numpy as np
import pytest
import tensorflow as tf
from paths import load_benchmark

from distributed_ac.acting.worker import RolloutWorker
from distributed_ac.bench import phases
from distributed_ac.bench import record as bench_record
from distributed_ac.bench import report as bench_report
from distributed_ac.commands import bench as bench_command
from distributed_ac.commands import main as cli
from distributed_ac.config.plan import learner_tf_threads
from distributed_ac.config.schema import Config
from distributed_ac.envs.vector import probe_space

TINY = Config(envs_per_worker=2, rollout_length=4, total_env_steps=1_000, hidden_sizes=(8,))
SCHEMA = {"phase", "env", "mode", "workers", "envs_per_worker", "rollout_length", "batch_size",
          "hidden_sizes", "topology", "device", "unit", "value", "samples", "repeats", "extra",
          "time", "machine"}


def test_record_is_one_json_line_with_the_median_and_the_machines_facts():
    rec = phases.record("env", TINY, 2, [3.0, 1.0, 2.0], 8)
    line = json.dumps(rec)
    assert "\n" not in line and json.loads(line) == rec
    assert SCHEMA <= set(rec)
    assert rec["value"] == 2.0 and rec["samples"] == [3.0, 1.0, 2.0] and rec["repeats"] == 3
    assert rec["unit"] == "env_steps/s" and rec["workers"] == 2
    m = rec["machine"]
    assert m["cpu_count"] >= 1 and m["cpu_model"]
    assert "gpu" in m and set(m["versions"]) >= {"tensorflow", "ray", "gymnasium", "numpy"}


def test_units_name_samples_for_the_learner_and_broadcasts_for_broadcast():
    assert phases.record("learner", TINY, 1, [1.0], 8)["unit"] == "samples/s"
    assert phases.record("broadcast", TINY, 1, [1.0], 0)["unit"] == "broadcasts/s"


@pytest.mark.parametrize("kind", ["env", "worker"])
def test_env_and_worker_phases_measure_a_positive_rate_in_a_fresh_process(kind):
    rec = phases.local_phase(kind, TINY, 1, repeats=2, min_time=0.05)
    assert rec["phase"] == kind and rec["repeats"] == 2 and rec["value"] > 0
    assert rec["batch_size"] == 8 and rec["extra"]["process_rss_mb"] > 0


def test_measuring_processes_start_with_a_rollout_workers_thread_limits(monkeypatch):
    from distributed_ac.acting.worker import THREAD_VARS

    monkeypatch.setenv("OPENBLAS_NUM_THREADS", "7")
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    with phases._worker_thread_env(2.5):
        assert all(os.environ[k] == "2" for k in THREAD_VARS)
    assert os.environ["OPENBLAS_NUM_THREADS"] == "7" and "OMP_NUM_THREADS" not in os.environ


def test_env_phase_with_two_workers_sums_two_processes():
    rec = phases.local_phase("env", TINY, 2, repeats=1, min_time=0.05)
    assert rec["workers"] == 2 and rec["value"] > 0


def test_synthetic_batch_masks_the_step_after_each_episode_end():
    space = probe_space("CartPole-v1")
    b = phases.synthetic_batch(space, 64, 32, seed=3)
    assert b.obs.shape == (64, 32, 4) and b.values.shape == (65, 32) and b.actions.dtype == np.int32
    ended = b.terminated[:-1] == 1
    assert ended.any() and (b.mask[1:][ended] == 0).all()


def test_random_weights_have_the_layout_a_worker_can_act_with():
    worker = RolloutWorker(TINY, limit_cpus=False)
    batch = worker.collect(phases.random_weights(TINY, worker.space, version=5))
    assert batch.policy_version == 5 and batch.obs.shape == (4, 2, 4)
    assert worker.load(phases.random_weights(TINY, worker.space, version=6)) == 6


def test_learner_phase_reports_samples_per_second_and_its_device():
    space = probe_space("CartPole-v1")
    rec = phases.learner_phase(TINY, space, 64, repeats=1, min_time=0.05)
    assert rec["batch_size"] == 64 and rec["device"] == "/CPU:0" and rec["value"] > 0
    assert rec["extra"]["weights_export_ms"] > 0


PIXELS = Config(env="fakes:PixelChase", envs_per_worker=2, rollout_length=4, total_env_steps=1_000)


def test_synthetic_batch_of_an_image_env_is_uint8_frames_time_major():
    b = phases.synthetic_batch(probe_space(PIXELS.env), 4, 3, seed=1)
    assert b.obs.dtype == np.uint8 and b.obs.shape == (4, 3, 36, 36, 1)
    assert b.obs.min() < 16 and b.obs.max() > 240  # the whole byte range, as frames use it


def test_random_weights_for_an_image_env_are_the_nature_cnn_bundle_a_worker_acts_with():
    from distributed_ac.models.cnn import bundle_size

    worker = RolloutWorker(PIXELS, limit_cpus=False)
    w = phases.random_weights(PIXELS, worker.space, version=3)
    p = w.parts
    assert len(p["actor.encoder"]) == len(p["v_target.encoder"]) == bundle_size("nature")
    assert p["actor.encoder"][0].shape == (8, 8, 1, 32) and p["actor.head"][0].shape == (512, 4)
    batch = worker.collect(w)
    assert batch.policy_version == 3 and batch.obs.dtype == np.uint8
    assert batch.obs.shape == (4, 2, 36, 36, 1)
    assert phases.with_version(w, 4).version == 4 and phases.with_version(w, 4).parts is w.parts


def test_worker_phase_on_an_image_env_acts_with_the_numpy_nature_cnn():
    rec = phases.local_phase("worker", PIXELS, 1, repeats=1, min_time=0.05)
    assert rec["value"] > 0 and rec["extra"]["torso"] == "nature"
    assert "frames_per_s" not in rec["extra"]  # no frame skip outside the ALE


def test_learner_phase_on_an_image_env_trains_the_nature_cnn_on_uint8_frames():
    rec = phases.learner_phase(PIXELS, probe_space(PIXELS.env), 8, repeats=1, min_time=0.05)
    assert rec["value"] > 0 and rec["batch_size"] == 8 and rec["extra"]["torso"] == "nature"


def test_ale_rates_report_frames_per_s_as_four_times_agent_steps():
    pytest.importorskip("ale_py")
    cfg = Config(env="ALE/Breakout-v5", envs_per_worker=2, rollout_length=4, total_env_steps=1_000)
    rec = phases.local_phase("worker", cfg, 1, repeats=1, min_time=0.05)
    assert rec["value"] > 0 and rec["extra"]["torso"] == "nature"
    assert rec["extra"]["frame_skip"] == 4
    assert rec["extra"]["frames_per_s"] == pytest.approx(4 * rec["value"], abs=0.5)
    for phase in ("learner", "e2e_async"):
        extra = phases.record(phase, cfg, 1, [100.0, 300.0], 8)["extra"]
        assert extra["frames_per_s"] == 800.0 and extra["frame_skip"] == 4
    assert "frames_per_s" not in phases.record("broadcast", cfg, 1, [5.0], 0)["extra"]


def test_learner_batch_is_what_the_run_plan_joins_in_async_and_all_workers_in_sync():
    # TINY: 2 envs x 4 steps a worker; auto B joins batches up to num_envs (32) envs
    assert phases.learner_batch_size(TINY, 3) == 24  # every worker's batch
    assert phases.learner_batch_size(Config(**{**vars(TINY), "num_envs": 4}), 8) == 16  # B = 2
    assert phases.learner_batch_size(Config(**{**vars(TINY), "batches_per_update": 1}), 3) == 8
    assert phases.learner_batch_size(Config(**{**vars(TINY), "mode": "sync",
                                              "num_envs": 2}), 3) == 24


def write_jsonl(path, records):
    path.write_text("".join(json.dumps(r) + "\n" for r in records))


def test_compare_prints_new_over_old_per_measurement(tmp_path, capsys):
    env1 = phases.record("env", TINY, 1, [100.0], 8)
    env2 = phases.record("env", TINY, 2, [300.0], 8)
    only_old = phases.record("learner", TINY, 1, [5.0], 8)
    write_jsonl(tmp_path / "old.jsonl", [env1, env2, only_old])
    write_jsonl(tmp_path / "new.jsonl", [{**env1, "value": 200.0}, {**env2, "value": 150.0}])
    rows = bench_report.compare(bench_report.load_jsonl(tmp_path / "old.jsonl"),
                                bench_report.load_jsonl(tmp_path / "new.jsonl"))
    assert sorted(r["ratio"] for r in rows) == [0.5, 2.0]
    code = cli.main(["bench", "--compare", str(tmp_path / "old.jsonl"), str(tmp_path / "new.jsonl")])
    out = capsys.readouterr().out
    assert code == 0
    assert "2.00x" in out and "0.50x" in out and "1 measurement(s) only in OLD" in out


def test_sweep_prints_json_lines_a_table_and_draws_a_png(tmp_path, capsys):
    out, png = tmp_path / "b.jsonl", tmp_path / "b.png"
    code = cli.main(["bench", "--phases", "env", "worker", "--sweep-workers", "1",
                     "--sweep-envs", "2", "4", "--rollout-length", "4", "--hidden-sizes", "8",
                     "--repeats", "1", "--min-time", "0.05", "--out", str(out), "--png", str(png)])
    captured = capsys.readouterr()
    assert code == 0
    lines = [json.loads(x) for x in captured.out.splitlines()]
    assert [(r["phase"], r["envs_per_worker"]) for r in lines] == [
        ("env", 2), ("worker", 2), ("env", 4), ("worker", 4)]
    assert bench_report.load_jsonl(out) == lines
    assert "workers" in captured.err and "envs/w" in captured.err
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def cell(w, worker, learner, e2e, batch=8, e2e_samples=None):
    """Hand-built records of one (workers, envs) cell: worker, learner and e2e_async."""
    return [phases.record("worker", TINY, w, [worker], 8), phases.record("learner", TINY, w, [learner], batch),
            phases.record("e2e_async", TINY, w, e2e_samples or [e2e], 8)]


def test_efficiency_divides_e2e_by_the_slower_stage_and_names_it():
    recs = cell(1, worker=2000.0, learner=1000.0, e2e=800.0) + cell(2, worker=500.0, learner=1000.0,
                                                                      e2e=250.0, e2e_samples=[200.0, 250.0, 300.0])
    eff = {r["workers"]: r for r in bench_report.pipeline_efficiency(recs)}
    assert eff[1]["phase"] == "efficiency" and eff[1]["value"] == 0.8
    assert eff[1]["extra"]["limited_by"] == "learner"
    assert (eff[1]["extra"]["worker_steps_per_s"], eff[1]["extra"]["learner_samples_per_s"]) == (2000.0, 1000.0)
    assert eff[2]["value"] == 0.5 and eff[2]["extra"]["limited_by"] == "worker"
    assert eff[2]["samples"] == [0.4, 0.5, 0.6] and eff[2]["envs_per_worker"] == 2
    assert json.loads(json.dumps(eff[2])) == eff[2] and SCHEMA <= set(eff[2])


def test_efficiency_uses_only_the_learner_at_the_e2e_batch_size_and_needs_all_three():
    wrong_batch = cell(1, worker=2000.0, learner=1000.0, e2e=800.0, batch=64)
    assert bench_report.pipeline_efficiency(wrong_batch) == []
    both = wrong_batch + [phases.record("learner", TINY, 1, [4000.0], 8)]
    assert bench_report.pipeline_efficiency(both)[0]["extra"]["limited_by"] == "worker"
    assert bench_report.pipeline_efficiency(cell(1, 2000.0, 1000.0, 800.0)[1:]) == []  # no worker
    assert bench_report.pipeline_efficiency(cell(1, 2000.0, 1000.0, 800.0)[:2]) == []  # no e2e


def test_table_and_compare_show_the_efficiency_as_a_ratio():
    old = cell(1, worker=2000.0, learner=1000.0, e2e=650.0)
    old += bench_report.pipeline_efficiency(old)
    new = cell(1, worker=2000.0, learner=1000.0, e2e=850.0)
    new += bench_report.pipeline_efficiency(new)
    text = bench_report.table(new)
    assert "efficiency" in text.splitlines()[0] and "0.85 (learner)" in text
    row = [r for r in bench_report.compare(old, new) if r["what"].startswith("efficiency")][0]
    assert row["ratio"] == pytest.approx(0.85 / 0.65)
    assert "0.650" in bench_report.format_compare([row]) and "0.850" in bench_report.format_compare([row])


def test_sweep_emits_each_cells_efficiency_after_its_phases(monkeypatch):
    def fake_rate(phase, value):  # an e2e run's batch: what the plan joins at W workers
        return lambda c, w, *a, **k: phases.record(phase, c, w, [value * w],
                                                  phases.learner_batch_size(c, w))

    monkeypatch.setattr(bench_command, "local_phase", lambda kind, c, w, *a: phases.record(kind, c, w, [3000.0], 8))
    monkeypatch.setattr(bench_command, "pipeline_learner_phase", lambda c, space, w, r, t: phases.record(
        "learner", c, w, [1000.0], phases.learner_batch_size(c, w)))
    monkeypatch.setattr(bench_command, "e2e_phase", fake_rate("e2e_async", 400.0))
    lines = []
    bench_command.sweep(TINY, ("worker", "learner", "e2e_async"), (1, 2), (2,), 1, 0.05, 1, emit=lines.append)
    recs = [json.loads(x) for x in lines]
    assert [(r["phase"], r["workers"]) for r in recs] == [
        ("worker", 1), ("learner", 1), ("e2e_async", 1), ("efficiency", 1),
        ("worker", 2), ("learner", 2), ("e2e_async", 2), ("efficiency", 2)]
    assert [r["value"] for r in recs if r["phase"] == "efficiency"] == [0.4, 0.8]


@pytest.mark.e2e
def test_a_real_sweep_reports_the_pipeline_efficiency_of_a_tiny_run(capsys):
    code = cli.main(["bench", "--phases", "worker", "learner", "e2e_async", "--sweep-workers", "1",
                     "--sweep-envs", "2", "--rollout-length", "4", "--hidden-sizes", "8",
                     "--repeats", "1", "--min-time", "0.05", "--e2e-updates", "5"])
    captured = capsys.readouterr()
    assert code == 0
    recs = [json.loads(x) for x in captured.out.splitlines() if x.startswith("{")]
    eff = [r for r in recs if r["phase"] == "efficiency"]
    assert len(eff) == 1 and eff[0]["value"] > 0 and eff[0]["extra"]["limited_by"] in ("worker", "learner")
    slowest = min(eff[0]["extra"]["worker_steps_per_s"], eff[0]["extra"]["learner_samples_per_s"])
    assert eff[0]["value"] == pytest.approx(eff[0]["extra"]["e2e_steps_per_s"] / slowest, abs=1e-3)
    assert "pipeline efficiency at 1 worker(s) x 2 envs" in captured.err
    # the learner stage ran as the pipeline runs it on this machine's cores
    assert eff[0]["extra"]["learner_tf_threads"] == learner_tf_threads(
        Config(worker_cpus=min(1.0, os.cpu_count())), 1, os.cpu_count(), local=True)


def test_bad_sweep_flags_exit_2_with_one_line(capsys):
    assert cli.main(["bench", "--sweep-workers", "0"]) == 2
    assert capsys.readouterr().err.startswith("dac: error:")


def test_gpu_sweep_says_no_gpu_on_a_machine_without_one(capsys, monkeypatch):
    monkeypatch.setattr(tf.config, "list_physical_devices", lambda kind=None: [])
    assert bench_command.gpu_sweep(TINY, (64,), 1, 0.05) == []
    assert "no GPU" in capsys.readouterr().err


def test_process_age_counts_from_this_process_start():
    assert 0 < bench_record.process_age_s() < 24 * 3600


def test_updates_to_solve_prints_one_json_line_per_variant_and_null_when_unsolved(capsys):
    mod = load_benchmark("updates_to_solve")
    # 2 updates of 2 envs x 4 steps cannot reach 475: unsolved, so no median.
    assert mod.main(["--seeds", "0", "--budget", "16", "--variant",
                     "tiny=--envs-per-worker 2 --rollout-length 4 --hidden-sizes 8"]) == 0
    lines = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert len(lines) == 1 and lines[0]["variant"] == "tiny"
    assert lines[0]["solved"] == 0 and lines[0]["median_env_steps"] is None
    assert lines[0]["runs"] == [{"seed": 0, "solved": False, "updates": 2, "env_steps": 16}]


def test_solve_series_interleaves_configs_and_summarises_each(monkeypatch, capsys, tmp_path):
    series = load_benchmark("solve_series")
    calls = []

    def fake_run(config, seed, extra):
        calls.append((config, seed, tuple(extra)))
        wall = {"a.yaml": 10.0, "b.yaml": 8.0}[config] + seed
        return {"config_file": config, "seed": seed, "solved": True, "wall_s": wall,
                "env_steps": 1000 * (seed + 1), "phases": {"first_update_s": wall - 2}}

    monkeypatch.setattr(series, "run_once", fake_run)
    out = tmp_path / "s.jsonl"
    assert series.main(["--config", "a.yaml", "--config", "b.yaml", "--seeds", "0", "1",
                        "--rounds", "2", "--out", str(out), "--", "--serial"]) == 0
    assert [c[:2] for c in calls[:4]] == [("a.yaml", 0), ("b.yaml", 0), ("a.yaml", 1), ("b.yaml", 1)]
    assert len(calls) == 8 and all(c[2] == ("--serial",) for c in calls)
    summary = [json.loads(x) for x in capsys.readouterr().out.splitlines()][-2:]
    assert summary[0]["config_file"] == "a.yaml" and summary[0]["median_wall_s"] == 10.5
    assert summary[1]["min_wall_s"] == 8.0 and summary[1]["max_first_update_s"] == 7.0
    assert len(out.read_text().splitlines()) == 10  # 8 runs + 2 summaries


def test_solve_series_runs_solve_time_in_a_fresh_process_and_reports_unsolved():
    series = load_benchmark("solve_series")
    run = series.run_once(series.os.path.join(series.HERE, "cartpole_fast.yaml"), 0,
                          ["--serial", "--total-env-steps", "1024"])
    assert run["benchmark"] == "solve_time" and run["solved"] is False
    assert run["env_steps"] == 1024 and run["phases"]["first_update_s"] > 0
