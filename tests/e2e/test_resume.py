"""Resume: K updates, then a resume for M more, equals K+M updates in one go, bit for bit
(serial, sync, one worker, fixed seed); counters, schedules, the V_target sync phase and
the metrics continue; a resume that would change the network is refused."""

import json
from functools import partial

import numpy as np
import pytest
from checkpoints import checkpoint_tensors, once_and_resumed
from helpers import train_updates

from distributed_ac.commands import main as cli
from distributed_ac.run.metrics import read_rows

BATCH = 4 * 8  # envs_per_worker x rollout_length
# checkpoint_every=2 puts a boundary (and so a reseed) at K=4; target_sync_every=3 makes
# the V_target sync phase at K=4 matter; short decay periods make both schedules move.
# They are set, not auto: an auto schedule spans the budget, which differs between the
# K-update session and the K+M run (tests/e2e/test_pixels.py resumes one on an unchanged
# budget).
BASE = dict(serial=True, num_workers=1, mode="sync", seed=7, envs_per_worker=4,
            rollout_length=8, hidden_sizes=(16,), checkpoint_every=2, target_sync_every=3,
            actor_lr_decay_steps=3, critic_lr_decay_steps=5, entropy_coef=0.01,
            log_every_s=0.001)
K, M = 4, 3


# run(run_dir, updates, resume=False, **fields): BASE for `updates` batches, quiet
run = partial(train_updates, BASE)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    return once_and_resumed(run, tmp_path_factory.mktemp("resume"), K, M)


def test_k_updates_then_resume_for_m_equals_k_plus_m_in_one_go_bit_for_bit(runs):
    _, once, first, resumed = runs
    assert first["updates"] == K and resumed["updates"] == once["updates"] == K + M
    a, b = checkpoint_tensors(once), checkpoint_tensors(resumed)
    assert a.keys() == b.keys()
    weights = [n for n in a if n.startswith(("actor_optimizer/_trainable", "v_target"))]
    slots = [n for n in a if "optimizer/_variables" in n]
    assert weights and slots  # the comparison covers weights, V_target and Adam's slots
    for name in a:
        assert np.array_equal(a[name], b[name]), name
    # and the comparison is not vacuous: training moved the weights after the resume
    k_tensors = checkpoint_tensors(first)
    assert any(not np.array_equal(k_tensors[n], b[n]) for n in weights)


def test_a_resume_from_a_final_checkpoint_off_the_grid_is_bit_exact_too(tmp_path):
    """Serial workers are rebuilt by replaying their actions (pool.SerialPool), so any
    checkpoint resumes exactly, not only those on the checkpoint_every grid."""
    k = 3  # checkpoint_every = 2: ckpt-3 is the final checkpoint of the first session
    once = run(tmp_path / "once", k + M)
    first = run(tmp_path / "split", k)
    assert first["checkpoint"].endswith("ckpt-3")
    assert (tmp_path / "split" / "checkpoints" / "ckpt-3.workers.npz").exists()
    resumed = run(tmp_path / "split", k + M, resume=True)
    a, b = checkpoint_tensors(once), checkpoint_tensors(resumed)
    for name in a:
        assert np.array_equal(a[name], b[name]), name
    assert resumed["episodes"] == once["episodes"]


def test_resume_continues_counters_schedules_and_v_target_phase(runs):
    _, once, _, resumed = runs
    t = checkpoint_tensors(resumed)
    assert t["actor_optimizer/_iterations/.ATTRIBUTES/VARIABLE_VALUE"] == K + M
    assert t["critic_optimizer/_iterations/.ATTRIBUTES/VARIABLE_VALUE"] == K + M
    assert t["learner_state/target_version/.ATTRIBUTES/VARIABLE_VALUE"] == (K + M) // 3
    assert t["train_state/counters/env_steps/.ATTRIBUTES/VARIABLE_VALUE"] == (K + M) * BATCH
    assert resumed["episodes"] == once["episodes"]
    assert resumed["mean_return_100"] == once["mean_return_100"]


def test_resumed_metrics_continue_where_the_checkpoint_left_off(runs):
    root, once, _, _ = runs
    rows = read_rows(root / "split" / "metrics.jsonl")
    steps = [r["env_steps"] for r in rows]
    assert steps == sorted(steps) and len(set(steps)) == len(steps)
    assert steps[-1] == (K + M) * BATCH and any(s > K * BATCH for s in steps)
    walls = [r["wall_s"] for r in rows]
    assert walls == sorted(walls)  # wall time adds up across sessions
    by_step = {r["env_steps"]: r for r in rows}
    ref = {r["env_steps"]: r for r in read_rows(root / "once" / "metrics.jsonl")}
    last = (K + M) * BATCH  # the learning-rate schedule resumed at the right step
    assert by_step[last]["charts/learning_rate_actor"] == ref[last]["charts/learning_rate_actor"]


def test_resume_with_a_different_network_is_refused_with_one_line(runs, capsys):
    root = runs[0]
    code = cli.main(["train", "--resume", str(root / "split"), "--hidden-sizes", "32", "32"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1
    assert "different network" in err and "hidden_sizes (16,) -> (32, 32)" in err


def test_resume_of_a_directory_without_a_checkpoint_is_refused(tmp_path, capsys):
    (tmp_path / "config.yaml").write_text("seed: 1\n")
    assert cli.main(["train", "--resume", str(tmp_path)]) == 2
    assert "has no checkpoint" in capsys.readouterr().err


def test_summary_names_the_run_directory_and_its_checkpoint(runs):
    root, _, first, _ = runs
    assert first["run_dir"] == str(root / "split")
    assert first["checkpoint"].endswith(f"ckpt-{K}")
    assert json.loads(json.dumps(first)) == first


def test_a_damaged_workers_file_costs_only_the_exact_replay_not_the_resume(tmp_path, caplog):
    """A torn ckpt-K.workers.npz (a crash mid-write cannot leave one, but a disk can) was a
    BadZipFile traceback; now the workers start from fresh seeds, with a warning."""
    run(tmp_path / "run", K)
    workers_file = tmp_path / "run" / "checkpoints" / f"ckpt-{K}.workers.npz"
    workers_file.write_bytes(workers_file.read_bytes()[:100])
    with caplog.at_level("WARNING"):
        resumed = run(tmp_path / "run", K + M, resume=True)
    assert resumed["updates"] == K + M
    assert any("cannot be read" in r.getMessage() for r in caplog.records)


def test_resume_is_bit_exact_with_the_clipped_objective_and_normalisation_too(tmp_path):
    """policy_loss clip shuffles minibatches from a checkpointed generator, and the
    observation and return statistics are checkpointed: K + M still equals K, then M."""
    extra = dict(policy_loss="clip", update_epochs=2, minibatch_size=8, normalize_obs=True,
                 normalize_reward=True)
    once = run(tmp_path / "once", K + M, **extra)
    run(tmp_path / "split", K, **extra)
    resumed = run(tmp_path / "split", K + M, resume=True, **extra)
    a, b = checkpoint_tensors(once), checkpoint_tensors(resumed)
    assert a.keys() == b.keys()
    assert any(n.startswith("obs_norm") for n in a) and any(n.startswith("shuffle_rng") for n in a)
    assert any(n.startswith("return_stats") for n in a)
    for name in a:
        assert np.array_equal(a[name], b[name]), name


@pytest.mark.parametrize("extra", [dict(core="lstm", core_size=8),
                                   dict(core="gru", core_size=8, policy_loss="clip",
                                        update_epochs=2, minibatch_size=16, topology="shared"),
                                   dict(env="distributed_ac.envs.choices:MaskedImageMultiChoice",
                                        core="gru", core_size=8, policy_loss="clip",
                                        update_epochs=2, minibatch_size=16,
                                        normalize_obs=True)])
def test_resume_is_bit_exact_with_a_recurrent_core(tmp_path, extra):
    """The workers' core states are saved beside the replayed actions (a replay rebuilds
    the envs, not the state, which took every past version's weights)."""
    once = run(tmp_path / "once", K + M, **extra)
    run(tmp_path / "split", K, **extra)
    with np.load(tmp_path / "split" / "checkpoints" / f"ckpt-{K}.workers.npz") as saved:
        assert any("_core_actor.core" in k for k in saved.files)
    resumed = run(tmp_path / "split", K + M, resume=True, **extra)
    a, b = checkpoint_tensors(once), checkpoint_tensors(resumed)
    assert a.keys() == b.keys() and any("core" in n for n in a)
    for name in a:
        assert np.array_equal(a[name], b[name]), name
    assert resumed["episodes"] == once["episodes"]


def test_a_checkpoint_with_one_sampling_stream_per_worker_resumes_on_new_seeds(tmp_path, caplog):
    """A serial checkpoint written before each sub-env had a sampling stream of its own
    holds one Generator's words per worker: the run resumes, its envs on new seeds."""
    from pathlib import Path

    first = run(tmp_path / "run", K)
    saved = Path(first["checkpoint"] + ".workers.npz")
    with np.load(saved) as data:
        arrays = dict(data)
    assert arrays["worker_0_rng"].shape == (4, 6)  # one stream per sub-env
    arrays["worker_0_rng"] = arrays["worker_0_rng"][0]  # the older layout: one per worker
    np.savez(saved, **arrays)
    with caplog.at_level("WARNING"):
        resumed = run(tmp_path / "run", K + M, resume=True)
    assert resumed["updates"] == K + M
    assert "one sampling stream per worker" in caplog.text


def test_a_garbled_checkpoint_state_file_resumes_from_the_checkpoint_files_bit_for_bit(runs,
                                                                                      tmp_path):
    """TF's `checkpoint` state file garbled, the checkpoints whole: the resume said 'no
    readable checkpoint'. It finds them by their files, resumes from the newest exactly,
    and names them in a new state file, so they are kept and removed as before."""
    once = runs[1]
    run(tmp_path / "run", K)
    state = tmp_path / "run" / "checkpoints" / "checkpoint"
    state.write_text('model_checkpoint_path: "ckpt-4"\nall_model_checkpoint_pa{{{')
    resumed = run(tmp_path / "run", K + M, resume=True)
    a, b = checkpoint_tensors(once), checkpoint_tensors(resumed)
    for name in a:
        assert np.array_equal(a[name], b[name]), name
    named = state.read_text()
    assert all(f'"ckpt-{n}"' in named for n in (4, 6, 7)), named  # keep_checkpoints 3
    assert (state.parent / "ckpt-4.workers.npz").exists()  # still the exact resume's
