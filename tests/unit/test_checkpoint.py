"""Checkpoints: what they hold (weights, Adam slots and iterations, counters, versions,
generator state), that a crash mid-save leaves the previous one usable, and that an
unreadable newest one falls back to the one before. The run directory's own rules are
in test_rundir.py."""

from pathlib import Path

import numpy as np
import pytest
from tensorflow.python.checkpoint import checkpoint_management

from distributed_ac.acting.worker import RolloutWorker
from distributed_ac.config.schema import Config
from distributed_ac.core.rng import generator_words, set_generator_words
from distributed_ac.learning.learner import Learner
from distributed_ac.run import rundir
from distributed_ac.run.checkpoint import Checkpointer, read_counters
from distributed_ac.training.state import RunState

SMALL = dict(envs_per_worker=4, rollout_length=8, hidden_sizes=(16,), total_env_steps=10_000)


def learner_and_state(tmp_path, **kw):
    cfg = Config(**SMALL, **kw)
    worker = RolloutWorker(cfg, limit_cpus=False)
    learner = Learner(cfg, worker.space)
    state = RunState.fresh(cfg)
    run = rundir.new_run(tmp_path / "run", cfg, overwrite=True)
    return cfg, worker, learner, state, Checkpointer(run, learner, state, keep=3)


def fresh_learner(tmp_path, **kw):
    """A new Learner and RunState, built as a resumed process would build them."""
    _, _, learner, state, _ = learner_and_state(tmp_path / "other", **kw)
    return learner, state


def reader(tmp_path, learner, state) -> Checkpointer:
    return Checkpointer(rundir.RunDir(tmp_path / "run"), learner, state, keep=3)


def step(worker, learner, state, n):
    for _ in range(n):
        batch = worker.collect(learner.weights())
        learner.step(batch)
        state.counters.updates += 1
        state.counters.env_steps += batch.env_steps
        state.stats.add(batch.episode_returns, batch.episode_lengths)


def values(variables):
    return [v.numpy().copy() for v in variables]


def all_state(learner):
    nets = learner.nets
    return values(nets.actor.variables + nets.critic.variables + nets.v_target.variables
                  + learner.actor_opt.variables + learner.critic_opt.variables)


def test_generator_state_round_trips_as_uint64_words():
    gen = np.random.default_rng(123)
    gen.standard_normal(7)  # leaves a cached state behind in has_uint32/uinteger too
    gen.integers(0, 2**32, dtype=np.uint32)
    words = generator_words(gen)
    assert words.dtype == np.uint64 and words.shape == (6,)
    expected = gen.random(5)
    other = np.random.default_rng(0)
    set_generator_words(other, words)
    np.testing.assert_array_equal(other.random(5), expected)


def test_restore_brings_back_weights_adam_slots_iterations_versions_and_run_state(tmp_path):
    cfg, worker, learner, state, ckpt = learner_and_state(tmp_path, target_sync_every=3,
                                                          actor_lr_decay_steps=2)
    step(worker, learner, state, 4)
    state.reseed_rng.integers(0, 10, size=3)
    state.counters.dropped_batches, state.counters.wall_s = 2, 12.5
    ckpt.save()
    saved = all_state(learner)
    saved_words = generator_words(state.reseed_rng)
    assert any(np.abs(s).sum() > 0 for s in values(learner.actor_opt.variables[1:]))  # slots moved

    fresh, fresh_state = fresh_learner(tmp_path, target_sync_every=3, actor_lr_decay_steps=2)
    assert reader(tmp_path, fresh, fresh_state).restore().endswith("ckpt-4")
    for a, b in zip(saved, all_state(fresh)):
        np.testing.assert_array_equal(a, b)
    assert int(fresh.actor_opt.iterations) == int(fresh.critic_opt.iterations) == 4
    assert float(fresh.actor_opt.learning_rate) == float(learner.actor_opt.learning_rate)
    assert (fresh.updates, fresh.policy_version, fresh.target_version) == (4, 4, 1)
    assert fresh_state.counters == state.counters
    assert list(fresh_state.stats.returns) == list(state.stats.returns)
    assert fresh_state.stats.episodes == state.stats.episodes
    np.testing.assert_array_equal(generator_words(fresh_state.reseed_rng), saved_words)
    assert read_counters(ckpt.latest)["env_steps"] == state.counters.env_steps


def test_a_crash_before_the_state_file_names_the_new_checkpoint_keeps_the_previous(tmp_path,
                                                                                   monkeypatch):
    _, worker, learner, state, ckpt = learner_and_state(tmp_path)
    step(worker, learner, state, 2)
    ckpt.save()
    at_two = all_state(learner)
    step(worker, learner, state, 2)

    def crash(*args, **kwargs):
        raise KeyboardInterrupt("killed mid-save")

    # The manager writes the new files first, then names them in the state file: dying
    # in between leaves the files of ckpt-4 on disk but unnamed.
    monkeypatch.setattr(checkpoint_management, "update_checkpoint_state_internal", crash)
    with pytest.raises(KeyboardInterrupt):
        ckpt.save()
    monkeypatch.undo()
    assert (Path(ckpt.manager.directory) / "ckpt-4.index").exists()

    fresh, fresh_state = fresh_learner(tmp_path)
    assert reader(tmp_path, fresh, fresh_state).restore().endswith("ckpt-2")
    for a, b in zip(at_two, all_state(fresh)):
        np.testing.assert_array_equal(a, b)
    assert fresh_state.counters.updates == 2


def test_an_unreadable_newest_checkpoint_falls_back_to_the_one_before(tmp_path):
    _, worker, learner, state, ckpt = learner_and_state(tmp_path)
    step(worker, learner, state, 1)
    ckpt.save()
    at_one = all_state(learner)
    step(worker, learner, state, 1)
    ckpt.save()
    data = next(Path(ckpt.manager.directory).glob("ckpt-2.data-*"))
    data.write_bytes(data.read_bytes()[:40])  # torn by a disk or copy failure

    fresh, fresh_state = fresh_learner(tmp_path)
    assert reader(tmp_path, fresh, fresh_state).restore().endswith("ckpt-1")
    for a, b in zip(at_one, all_state(fresh)):
        np.testing.assert_array_equal(a, b)


def test_saving_twice_at_one_update_never_rewrites_the_named_checkpoint(tmp_path):
    _, worker, learner, state, ckpt = learner_and_state(tmp_path)
    step(worker, learner, state, 1)
    assert ckpt.save().endswith("ckpt-1")
    assert ckpt.save() is None


def test_a_checkpoint_of_the_positional_layout_is_refused_in_one_line(tmp_path, capsys):
    """0.1 wrote the networks' weights as positional lists and no layout marker: resume,
    evaluate and export all refuse such a checkpoint with one line (exit 2)."""
    import tensorflow as tf

    from distributed_ac.commands.main import main

    _, _, learner, _, _ = learner_and_state(tmp_path)
    old = tf.train.Checkpoint(actor=learner.nets.actor, critic=learner.nets.critic)
    tf.train.CheckpointManager(old, str(tmp_path / "run" / "checkpoints"), 3,
                               checkpoint_name="ckpt").save(checkpoint_number=5)
    for argv in (["evaluate", str(tmp_path / "run")],
                 ["export", str(tmp_path / "run"), "--out", str(tmp_path / "model")],
                 ["train", "--resume", str(tmp_path / "run")]):
        assert main(argv) == 2, argv
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "written by distributed_ac 0.1" in err[0], (argv, err)


def test_the_kl_penalty_s_adapted_weight_is_restored(tmp_path):
    kw = dict(policy_loss="clip", update_epochs=2, minibatch_size=16, kl_coef=0.2,
              kl_target=1e-9)  # every update exceeds twice the target: x1.5 each
    _, worker, learner, state, ckpt = learner_and_state(tmp_path, **kw)
    step(worker, learner, state, 3)
    ckpt.save()
    assert float(learner.objective.kl_coef.numpy()) == pytest.approx(0.2 * 1.5 ** 3)

    fresh, fresh_state = fresh_learner(tmp_path, **kw)
    assert float(fresh.objective.kl_coef.numpy()) == pytest.approx(0.2)
    reader(tmp_path, fresh, fresh_state).restore()
    assert fresh.objective.kl_coef.numpy() == learner.objective.kl_coef.numpy()
