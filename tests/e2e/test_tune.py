"""`dac tune`: the search space and its checks, trials as real training runs reporting
and checkpointing through Tune, PBT's exploit, resume, and the outputs."""

import dataclasses
import json
import os
import subprocess
from pathlib import Path

import numpy as np
import pytest
from helpers import environ_with_tests, popen_dac, write_yaml
from paths import ROOT

from distributed_ac.commands.main import main
from distributed_ac.config.schema import Config, load_yaml
from distributed_ac.core.errors import ConfigError, UsageError
from distributed_ac.tuning.search_space import TRAIN_METRIC, default_metric, parse_space
from distributed_ac.tuning.experiment_spec import TuneSpec

SPACE = {"actor_lr": {"loguniform": [1e-4, 1e-2]}, "entropy_coef": {"choice": [0.0, 0.01]},
         "gamma": {"uniform": [0.95, 0.999]}, "num_envs": {"grid": [8, 16]}}


# ---- the space ------------------------------------------------------------------------

def test_a_space_of_each_kind_parses_with_ints_drawn_for_int_fields():
    space = parse_space({**SPACE, "rollout_length": {"uniform": [8, 32]}}, Config())
    assert {n: d.kind for n, d in space.items()} == {
        "actor_lr": "loguniform", "entropy_coef": "choice", "gamma": "uniform",
        "num_envs": "grid", "rollout_length": "uniform"}
    assert space["actor_lr"].values == (1e-4, 1e-2) and not space["actor_lr"].integer
    assert space["rollout_length"].integer and space["num_envs"].values == (8, 16)


@pytest.mark.parametrize("data, names", [
    ({"actor_lrr": {"choice": [1e-3]}}, "unknown config field(s): actor_lrr"),
    ({}, "is empty"),
    (None, "is empty"),
    ({"gamma": {"normal": [0, 1]}}, "gamma must be one of"),
    ({"gamma": {"uniform": [0.99, 0.9]}}, "low < high"),
    ({"gamma": {"uniform": [0.9, 1.5]}}, "gamma must be in [0, 1]"),
    ({"actor_lr": {"loguniform": [0, 1e-2]}}, "low > 0"),
    ({"num_envs": {"uniform": [8.5, 16]}}, "bounds must be ints"),
    ({"activation": {"choice": ["tanh", "cosine"]}}, "activation"),
    ({"serial": {"choice": [True, False]}}, "cannot be searched over"),
    ({"gamma": {"uniform": [0.9, 0.99], "start": 1.5}}, "gamma must be in [0, 1]"),
    ({"num_envs": {"grid": [8, 16], "start": 8}}, "start goes with choice"),
])
def test_a_bad_space_is_one_config_error_naming_the_problem(data, names):
    with pytest.raises(ConfigError) as e:
        parse_space(data, Config(), where="space.yaml")
    assert names in str(e.value) and "\n" not in str(e.value)


def test_the_default_metric_is_the_training_mean_without_evaluation_and_eval_with_it():
    assert default_metric(Config()) == TRAIN_METRIC

    assert default_metric(Config(eval_every=10)) == "eval/mean_return"
    spec = TuneSpec(base=Config(), space=parse_space(SPACE, Config()), metric="eval/mean_return")
    with pytest.raises(UsageError, match="do not evaluate"):
        spec.check()


@pytest.mark.parametrize("extra, space, says", [
    ([], {"actor_lrr": {"choice": [1e-3]}}, "unknown config field(s): actor_lrr"),
    ([], {}, "is empty"),
    (["--metric", "charts/no_such_metric"], SPACE, "--metric charts/no_such_metric: no trial "
                                                   "reports it"),
    (["--scheduler", "pbt"], SPACE, "cannot perturb grid dimensions (num_envs)"),
    (["--scheduler", "pbt"], {"hidden_sizes": {"choice": [[32], [64]]}}, "cannot vary the network"),
    (["--scheduler", "pbt"], {"normalize_obs": {"choice": [True, False]}},
     "cannot vary the network or the state its checkpoints hold (normalize_obs)"),
    (["--num-samples", "0"], SPACE, "--num-samples must be >= 1"),
    (["--wandb"], SPACE, "--wandb is for dac train"),
])
def test_bad_input_is_one_line_and_exit_2_before_any_trial(tmp_path, capsys, monkeypatch,
                                                           extra, space, says):
    from distributed_ac.pool import ray_pool

    def no_ray(*args, **kwargs):
        raise AssertionError("Ray was started for a search that is refused")

    monkeypatch.setattr(ray_pool, "start_ray", no_ray)
    exp = tmp_path / "exp"
    code = main(["tune", "--space", write_yaml(tmp_path, space, "space.yaml"),
                 "--exp-dir", str(exp), *extra])
    err = capsys.readouterr().err
    assert code == 2 and says in err and err.count("\n") == 1, err
    assert not exp.exists()  # refused before anything was written or started


def test_a_missing_space_and_a_resume_of_no_experiment_are_refused(tmp_path, capsys):
    assert main(["tune"]) == 2
    assert "needs --space" in capsys.readouterr().err
    assert main(["tune", "--resume", str(tmp_path)]) == 2
    assert "is not a dac tune experiment" in capsys.readouterr().err


# ---- new rates without a rebuild (PBT's explore) ----------------------------------------

def test_set_rates_makes_the_next_update_the_one_a_learner_built_with_them_makes():
    from distributed_ac.acting.worker import RolloutWorker
    from distributed_ac.learning.learner import Learner

    base = Config(envs_per_worker=8, rollout_length=8, total_env_steps=10_000, actor_lr=1e-3,
                  critic_lr=1e-3, entropy_coef=0.0, actor_lr_decay_steps=4)
    new = dataclasses.replace(base, actor_lr=5e-2, critic_lr=2e-2, entropy_coef=0.5)
    worker = RolloutWorker(base, limit_cpus=False)
    changed, built = Learner(base, worker.space), Learner(new, worker.space)
    batch = worker.collect(changed.weights())
    changed.step(batch)  # traced with the old rates
    built.step(batch)
    traced = changed._train_steps[False].experimental_get_tracing_count()
    # the two learners now differ only by their rates; make them equal by assignment
    for a, b in zip(built.nets.actor.variables + built.nets.critic.variables,
                    changed.nets.actor.variables + changed.nets.critic.variables):
        a.assign(b)
    for a, b in zip(built.optimizers.variables, changed.optimizers.variables):
        a.assign(b)
    changed.set_rates(new.actor_lr, new.critic_lr, new.entropy_coef)
    batch = worker.collect(changed.weights())
    m_changed, m_built = changed.step(batch), built.step(batch)
    assert m_changed["learning_rate_actor"] == pytest.approx(5e-2 * 0.5 ** (1 / 4), rel=1e-5)
    assert m_changed["learning_rate_critic"] == pytest.approx(m_built["learning_rate_critic"])
    for a, b in zip(changed.nets.actor.variables + changed.nets.critic.variables,
                    built.nets.actor.variables + built.nets.critic.variables):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-5, atol=1e-7)
    assert changed._train_steps[False].experimental_get_tracing_count() == traced


# ---- a trial: reports, checkpoints, PBT's exploit ----------------------------------------

def actor_arrays(learner):
    return [v.numpy().copy() for v in learner.nets.actor.variables + learner.nets.critic.variables]


def test_an_exploit_restores_another_trials_weights_into_a_kept_learner_with_new_rates(tmp_path):
    from fakes import FakeTuneSession

    from distributed_ac.tuning import trial

    base = Config(num_envs=8, rollout_length=16, total_env_steps=1024, mode="sync")
    spec = TuneSpec(base=base, space=parse_space({"actor_lr": {"choice": [1e-3, 3e-2]},
                                                  "entropy_coef": {"choice": [0.0, 0.5]}},
                                                 base), metric=TRAIN_METRIC, report_every=2)
    a = FakeTuneSession(tmp_path / "a")
    trial.run_trial({"actor_lr": 1e-3, "entropy_coef": 0.0}, spec, a)
    assert [m["updates"] for m, _ in a.reports] == [2, 4, 6, 8]
    last = a.reports[-1][1]  # the project's checkpoint format: TF tensors and the config
    assert sorted(p.name for p in (last / "checkpoints").iterdir()) == [
        "checkpoint", "ckpt-8.data-00000-of-00001", "ckpt-8.index"]
    assert load_yaml(last / "config.yaml").actor_lr == 1e-3
    a_weights = actor_arrays(trial._kept_learner[1])
    # trial C, the same but for its rate, trains other weights; its learner is kept
    trial.run_trial({"actor_lr": 3e-2, "entropy_coef": 0.0}, spec, FakeTuneSession(tmp_path / "c"))
    c_learner = trial._kept_learner[1]
    c_weights = actor_arrays(c_learner)
    assert not all(np.array_equal(x, y) for x, y in zip(a_weights, c_weights))
    # B exploits A (its checkpoint, a perturbed config) on C's process, with no budget left
    b = FakeTuneSession(tmp_path / "b", start_from=last)
    trial.run_trial({"actor_lr": 1e-2, "entropy_coef": 0.5}, spec, b)
    assert trial._kept_learner[1] is c_learner  # not rebuilt
    for x, y in zip(actor_arrays(c_learner), a_weights):
        np.testing.assert_array_equal(x, y)
    assert c_learner.optimizers.initial_rates["actor"].numpy() == pytest.approx(1e-2)
    assert c_learner.objective.entropy_coef.numpy() == pytest.approx(0.5)
    assert load_yaml(tmp_path / "b" / "run" / "config.yaml").actor_lr == 1e-2


# ---- end to end on a local Ray -----------------------------------------------------------

def dac(*argv: str, **variables) -> subprocess.Popen:
    """`dac ARGV` started in a child whose PYTHONPATH holds tests/ and the repository root
    (the trials' processes import fakes), with `variables` set besides."""
    return popen_dac(*argv, env=environ_with_tests(ROOT, **variables))


# two trials of one serial worker and one CPU each: they fit a 2-CPU local Ray side by side
SMALL = ["--num-envs", "8", "--rollout-length", "16", "--mode", "sync", "--num-workers", "1",
         "--total-env-steps", "2048", "--report-every", "2", "--max-concurrent", "2"]
GRID = {"entropy_coef": {"grid": [0.0, 0.01]}, "actor_lr": {"choice": [1e-3]}}


def finished(proc: subprocess.Popen, timeout: float = 600) -> tuple[int, str, str]:
    out, err = proc.communicate(timeout=timeout)
    return proc.returncode, out, err


@pytest.fixture(scope="module")
def experiment(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("tune")
    exp = tmp / "exp"
    # evaluating during training: the metric defaults to the evaluation mean
    code, out, err = finished(dac("tune", "--space", write_yaml(tmp, GRID, "space.yaml"),
                                  "--num-samples", "1", "--exp-dir", str(exp), *SMALL,
                                  "--eval-every", "4", "--eval-episodes", "2"))
    assert code == 0, err[-3000:]
    assert json.loads(out.splitlines()[-1])["best_config"] == str(exp / "best.yaml")
    return exp


def rows(exp: Path) -> list[dict]:
    return [json.loads(line) for line in (exp / "results.jsonl").read_text().splitlines()]


@pytest.mark.e2e
def test_two_trials_train_to_their_budget_and_write_every_output(experiment):
    table = rows(experiment)
    assert sorted(r["entropy_coef"] for r in table) == [0.0, 0.01]
    # a report every 2 updates once the first evaluation (update 4) is in: at most 7
    assert all(r["status"] == "OK" and r["env_steps"] == 2048 and r["updates"] == 16
               and 1 <= r["training_iteration"] <= 7 and r[TRAIN_METRIC] > 0 for r in table)
    assert all(r["eval/mean_return"] > 0 for r in table)  # the metric the trials report
    assert (experiment / "results.csv").read_text().count("\n") == 3
    assert (experiment / "curves.png").read_bytes()[:4] == b"\x89PNG"
    # each trial trained with this package's trial settings: serial, one TF thread
    trial_cfgs = [load_yaml(p) for p in experiment.glob("run_trial_*/run/config.yaml")]
    assert len(trial_cfgs) == 2 and all(c.serial and c.learner_threads == 1 for c in trial_cfgs)
    assert sorted(c.seed for c in trial_cfgs) == [0, 1]  # base seed + the trial's number


@pytest.mark.e2e
def test_the_best_config_is_a_preset_dac_train_takes_as_it_is(experiment):
    from distributed_ac.commands.train import parse_train_args

    table = rows(experiment)
    # the experiment evaluates during training, so its metric is the evaluation mean;
    # of equal trials the first is the best
    best = max(enumerate(table), key=lambda ir: (ir[1]["eval/mean_return"], -ir[0]))[1]
    cfg = load_yaml(experiment / "best.yaml")
    assert cfg.entropy_coef == best["entropy_coef"] and cfg.num_envs == 8 and cfg.mode == "sync"
    assert not cfg.serial  # the trials' own placement is not part of the result
    assert parse_train_args(["--config", str(experiment / "best.yaml")]).cfg == cfg


@pytest.fixture(scope="module")
def interrupted(tmp_path_factory) -> dict:
    """An experiment sent SIGINT once both trials have reported twice or more (they hold
    at 1024 env steps while the gate file exists): its exit code, stdout, stderr, and
    its files and results rows as the interruption left them."""
    tmp = tmp_path_factory.mktemp("interrupted")
    gate = tmp / "gate"  # while it exists, the trials' envs hold after 1024 steps
    gate.write_text("")
    exp = tmp / "exp"
    proc = dac("tune", "--space", write_yaml(tmp, GRID, "space.yaml"), "--num-samples", "1",
               "--exp-dir", str(exp), "--env", "fakes:GatedCartPole", *SMALL,
               DAC_TEST_GATE=str(gate))
    try:
        code, out, err = interrupt_when_both_hold(proc, exp)
    finally:
        if proc.poll() is None:
            proc.kill()
    return {"exp": exp, "gate": gate, "code": code, "out": out, "err": err,
            "files": {p.name for p in exp.iterdir()},
            "rows": rows(exp) if (exp / "results.jsonl").exists() else []}


@pytest.mark.e2e
def test_a_ctrl_c_search_writes_its_results_so_far_says_how_to_go_on_and_exits_130(interrupted):
    exp, err = interrupted["exp"], interrupted["err"]
    assert interrupted["code"] == 130, err[-3000:]  # as dac train's: 128 + SIGINT
    assert err.splitlines()[-1] == (f"dac: interrupted by SIGINT: the results so far are in "
                                    f"{exp}; continue the search with: dac tune --resume {exp}")
    assert err.count("dac tune --resume") == 1 and "dac: error" not in err
    assert {"results.jsonl", "results.csv", "best.yaml", "curves.png"} <= interrupted["files"]
    table = interrupted["rows"]
    assert sorted(r["entropy_coef"] for r in table) == [0.0, 0.01]
    assert all(512 <= r["env_steps"] <= 1024 for r in table)  # held short of the budget
    summary = json.loads(interrupted["out"].splitlines()[-1])
    assert summary["stopped_by"] == "SIGINT" and summary["trials"] == 2
    assert summary["best_trial"] in {r["trial"] for r in table}


@pytest.mark.e2e
def test_an_interrupted_experiment_resumes_each_trial_from_its_checkpoint(interrupted):
    import csv

    exp, gate = interrupted["exp"], interrupted["gate"]
    gate.unlink()
    code, out, err = finished(dac("tune", "--resume", str(exp), DAC_TEST_GATE=str(gate)))
    assert code == 0, err[-3000:]
    assert [r["env_steps"] for r in rows(exp)] == [2048, 2048]
    assert json.loads(out.splitlines()[-1])["stopped_by"] is None
    for progress in exp.glob("run_trial_*/progress.csv"):
        reports = list(csv.DictReader(progress.open()))
        # one count throughout: 256 env steps a report, from the checkpoint on after resume
        assert all(int(r["env_steps"]) == 256 * int(r["training_iteration"]) for r in reports)
        restored = [r for r in reports
                    if int(r["iterations_since_restore"]) < int(r["training_iteration"])]
        assert restored and int(restored[-1]["env_steps"]) == 2048


def interrupt_when_both_hold(proc: subprocess.Popen, exp: Path) -> tuple[int, str, str]:
    """SIGINT once both trials have reported twice or more (they hold at 1024 steps);
    the exit code, stdout and stderr."""
    import signal
    import time

    def reported_twice() -> int:
        later = {p.parents[2] for p in exp.glob("run_trial_*/checkpoint_*/checkpoints/checkpoint")
                 if not p.parents[1].name.endswith("_000000")}
        return len(later)

    while reported_twice() < 2:
        assert proc.poll() is None, proc.communicate()[1][-3000:]
        time.sleep(0.5)
    proc.send_signal(signal.SIGINT)
    return finished(proc, timeout=300)


def test_sigint_and_sigterm_stop_a_search_by_tunes_own_stop_and_abort_before_it_listens():
    """experiment.SearchStop, in-process with a stand-in for the handler Tune's fit
    installs (for SIGUSR1, and for SIGINT unless told not to): no Ray."""
    import signal

    from distributed_ac.core.errors import Interrupted
    from distributed_ac.tuning.experiment import SearchStop

    watched = (signal.SIGINT, signal.SIGTERM, signal.SIGUSR1)
    before = {s: signal.getsignal(s) for s in watched}
    disable = os.environ.get(SearchStop.DISABLE)
    stops = []

    def tune_stop(signum, frame):  # sets Tune's "interrupted" event; the loop ends
        stops.append(signum)

    for first in (signal.SIGTERM, signal.SIGINT):
        stops.clear()
        with SearchStop() as stop:
            assert os.environ[SearchStop.DISABLE] == "1"  # Tune leaves SIGINT to us
            signal.signal(signal.SIGUSR1, tune_stop)  # what fit does once it starts
            signal.raise_signal(first)
            assert stop.received == first and stops == [signal.SIGUSR1]
            signal.raise_signal(signal.SIGTERM)  # more SIGTERMs change nothing
            assert stop.received == first and len(stops) == 2
        assert {s: signal.getsignal(s) for s in watched} == before
        assert os.environ.get(SearchStop.DISABLE) == disable
    with pytest.raises(KeyboardInterrupt), SearchStop():  # a second Ctrl-C aborts at once
        signal.signal(signal.SIGUSR1, tune_stop)
        signal.raise_signal(signal.SIGINT)
        signal.raise_signal(signal.SIGINT)
    # before Tune listens (no trial has run yet), either aborts at once, with its own code
    with pytest.raises(KeyboardInterrupt), SearchStop():
        signal.signal(signal.SIGUSR1, signal.SIG_DFL)
        signal.raise_signal(signal.SIGINT)
    with pytest.raises(Interrupted) as e, SearchStop():
        signal.signal(signal.SIGUSR1, signal.SIG_DFL)
        signal.raise_signal(signal.SIGTERM)
    assert e.value.signum == signal.SIGTERM
    assert {s: signal.getsignal(s) for s in watched} == before


def test_asha_and_pbt_are_built_from_the_spec_with_the_space_as_tunes_distributions():
    from ray.tune.schedulers import ASHAScheduler, PopulationBasedTraining

    from distributed_ac.tuning import experiment

    base = Config(num_envs=8, rollout_length=16, total_env_steps=2048)
    space = parse_space({"actor_lr": {"loguniform": [1e-4, 1e-2]},
                         "rollout_length": {"uniform": [8, 32]}}, base)
    spec = TuneSpec(base=base, space=space, metric=TRAIN_METRIC, scheduler="asha",
                    report_every=2, grace_period=3)
    asha = experiment.scheduler(spec)
    assert isinstance(asha, ASHAScheduler)
    assert asha._max_t == 8  # 16 updates, a report every 2
    assert min(t for t, _ in asha._brackets[0]._rungs) == 3  # the first rung: the grace period
    pbt = experiment.scheduler(dataclasses.replace(spec, scheduler="pbt"))
    assert isinstance(pbt, PopulationBasedTraining)
    assert set(pbt._hyperparam_mutations) == {"actor_lr", "rollout_length"}
    ints = experiment.param_space(spec)["rollout_length"]
    assert (ints.lower, ints.upper) == (8, 33)  # high included
    # a start: every trial begins there, and PBT explores the distribution from it
    started = parse_space({"actor_lr": {"loguniform": [1e-4, 1e-2], "start": 5e-3}}, base)
    spec = dataclasses.replace(spec, space=started, scheduler="pbt")
    assert experiment.param_space(spec) == {"actor_lr": 5e-3}
    mutation = experiment.scheduler(spec)._hyperparam_mutations["actor_lr"]
    assert (mutation.lower, mutation.upper) == (1e-4, 1e-2)
