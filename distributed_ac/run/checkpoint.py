"""Checkpoints: one tf.train.Checkpoint per save, kept by a CheckpointManager. No pickle.

A checkpoint holds the whole training state that lives in the driver:
- actor, critic and V_target (Keras models) and both Keras optimizers, i.e. Adam's slots
  and its `iterations`, which is the step both ExponentialDecay schedules read;
- a `TrainState` of tf.Variables mirroring what the driver's RunState (its Counters, the
  recent-episode window behind the 100-episode mean, the reseed Generator's state as
  uint64 words) and the Learner (update count, policy and V_target versions) say they
  are: each saves and restores itself (`arrays()` / `state()` and their inverses).
Loading reads tensors only: no code runs.

Rollout workers hold the rest (env states, sampling streams). Envs cannot be saved in
general, and a checkpoint never restarts them: an uninterrupted run's episodes end only
by the env. What a resume does instead:
- serial mode: beside ckpt-K, `ckpt-K.workers.npz` (plain arrays, read with
  allow_pickle=False) holds each worker's sampling-stream state and every action it has
  taken (pool.SerialPool.replay_state). Fresh workers re-step those actions, which
  rebuilds the very env states, so in serial sync mode K updates, then a resume for M
  more, equal K+M updates in one go, bit for bit, from any checkpoint;
- Ray workers: each restarts its envs from a seed drawn from the checkpointed reseed
  Generator (the interrupted run's episodes under way are lost; nothing else is).

Crash safety: the manager writes a new checkpoint's files under a new name first and
only then replaces TF's `checkpoint` state file (write, then rename) to name it, so a
crash mid-save leaves the previous checkpoint named and whole. `restore` also falls
back to an older checkpoint when the newest cannot be read. A save never reuses the
number of a checkpoint already named (it would overwrite the one usable copy).
"""

from __future__ import annotations

import logging
import os
import zipfile
from pathlib import Path

import numpy as np
import tensorflow as tf

from distributed_ac.core.errors import CheckpointError
from distributed_ac.run.rundir import RunDir

log = logging.getLogger(__name__)

# What TensorFlow raises for a missing, torn or mismatched checkpoint (a torn file can
# surface as an IndexError from the reader).
_UNREADABLE = (tf.errors.OpError, ValueError, AssertionError, IndexError)


class TrainState(tf.Module):
    """tf.Variables mirroring a state given as (nested) dicts of NumPy values of fixed
    shape: the driver's RunState.arrays() and the learner's Learner.state(). It knows
    nothing of what they mean; each owner saves and restores itself."""

    def __init__(self, arrays: dict):
        super().__init__(name="train_state")
        self._names = list(arrays)
        for name, value in arrays.items():
            setattr(self, name, _variables(value))

    def capture(self, arrays: dict) -> None:
        for name, value in arrays.items():
            _assign(getattr(self, name), value)

    def values(self) -> dict:
        return {name: _numpy(getattr(self, name)) for name in self._names}


def _variables(value):
    if isinstance(value, dict):
        return {k: _variables(v) for k, v in value.items()}
    return tf.Variable(np.asarray(value))


def _assign(var, value) -> None:
    if isinstance(var, dict):
        for k, v in value.items():
            _assign(var[k], v)
    else:
        var.assign(np.asarray(value))


def _numpy(var):
    return {k: _numpy(v) for k, v in var.items()} if isinstance(var, dict) else var.numpy()


# The model's layout in checkpoints: 2 = the model of named parts (0.2). Checkpoints of
# 0.1 hold a positional layout and no such variable; they are refused with one line.
MODEL_LAYOUT = 2
LAYOUT_KEY = "model_layout/.ATTRIBUTES/VARIABLE_VALUE"


def _model_objects(nets) -> dict:
    """What evaluate and export need: the networks, the layout they were saved in, and the
    observation statistics with normalize_obs (only then)."""
    norm = {"obs_norm": nets.obs_norm} if nets.obs_norm is not None else {}
    return {"actor": nets.actor, "critic": nets.critic, "v_target": nets.v_target,
            "model_layout": tf.Variable(MODEL_LAYOUT, trainable=False), **norm}


def check_layout(path: str) -> None:
    """CheckpointError unless the checkpoint at `path` holds this version's model layout."""
    try:
        names = tf.train.load_checkpoint(path).get_variable_to_shape_map()
    except _UNREADABLE:
        return  # unreadable: the restore that follows says so
    if LAYOUT_KEY not in names:
        raise CheckpointError(f"{path} was written by distributed_ac 0.1, whose weights layout "
                              "this version cannot read; start a new run (or evaluate it with 0.1)")


class Checkpointer:
    """Saves and restores a Learner plus the driver's RunState in a run's checkpoints/,
    and brings the pool's workers back on restore (serial: replay; Ray: reseed)."""

    def __init__(self, run: RunDir, learner, state, keep: int, pool=None):
        self.learner, self.state, self.pool = learner, state, pool
        self.mirror = TrainState({**state.arrays(), **learner.state()})
        returns = ({"return_stats": learner.return_stats} if learner.return_stats is not None
                   else {})
        if learner.cfg.policy_loss == "clip":
            returns["shuffle_rng"] = learner.shuffle_rng
        self.ckpt = tf.train.Checkpoint(**_model_objects(learner.nets), **returns,
                                        actor_optimizer=learner.actor_opt,
                                        critic_optimizer=learner.critic_opt, train_state=self.mirror)
        self.manager = tf.train.CheckpointManager(self.ckpt, str(run.checkpoints),
                                                  max_to_keep=keep, checkpoint_name="ckpt")
        self.saved_at: int | None = None  # updates of the newest checkpoint written or read

    @property
    def latest(self) -> str | None:
        return self.manager.latest_checkpoint

    def save(self) -> str | None:
        """Write ckpt-<updates>; a no-op when that update is already checkpointed."""
        updates = self.state.counters.updates
        if updates == self.saved_at:
            return None
        self.mirror.capture({**self.state.arrays(), **self.learner.state()})
        if hasattr(self.pool, "replay_state"):  # written first: a named checkpoint has it
            _write_npz(self._workers_file(os.path.join(self.manager.directory, f"ckpt-{updates}")),
                       self.pool.replay_state())
        path = self.manager.save(checkpoint_number=updates)
        self.saved_at = updates
        self._remove_orphan_worker_files()
        return path

    @staticmethod
    def _workers_file(checkpoint_path: str) -> Path:
        return Path(checkpoint_path + ".workers.npz")

    def _remove_orphan_worker_files(self) -> None:
        kept = {str(self._workers_file(p)) for p in self.manager.checkpoints}
        for f in Path(self.manager.directory).glob("*.workers.npz"):
            if str(f) not in kept:
                f.unlink(missing_ok=True)

    def _restore_workers(self, path: str) -> None:
        """Serial: replay the saved workers' actions when the file fits this pool; else,
        and with Ray workers, restart every worker's envs from the reseed Generator."""
        if self.pool is None:
            return
        f = self._workers_file(path)
        if hasattr(self.pool, "restore_replay_state") and f.exists():
            try:
                with np.load(f, allow_pickle=False) as data:
                    saved = dict(data)
            except (OSError, ValueError, zipfile.BadZipFile) as e:  # torn or damaged
                log.warning("%s cannot be read (%s): the workers' envs restart from new seeds",
                            f.name, _first_line(e))
                saved = {}
            if saved and len(saved) == 2 * len(self.pool):
                self.pool.restore_replay_state(saved)
                return
            if saved:
                log.warning("%s holds %d workers, this run has %d: their envs restart from "
                            "new seeds", f.name, len(saved) // 2, len(self.pool))
        self.pool.reseed(self.state.draw_seeds(len(self.pool)))

    def restore(self) -> str:
        """Load the newest readable checkpoint into the learner and the RunState."""
        if self.manager.checkpoints:
            check_layout(self.manager.checkpoints[-1])
        for path in reversed(self.manager.checkpoints):
            try:
                self.ckpt.restore(path).assert_existing_objects_matched()
            except _UNREADABLE as e:
                log.warning("checkpoint %s cannot be restored (%s); trying an older one",
                            path, _first_line(e))
                continue
            restored = self.mirror.values()
            self.state.load_arrays(restored)
            self.learner.load_state(restored)
            self.saved_at = self.state.counters.updates
            self._restore_workers(path)
            return path
        raise CheckpointError(f"no readable checkpoint in {self.manager.directory}")


def _write_npz(path: Path, arrays: dict[str, np.ndarray]) -> None:
    """np.savez to a temporary name, then rename: a crash leaves no torn file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as f:
        np.savez(f, **arrays)
    os.replace(tmp, path)


def restore_networks(run: RunDir, nets) -> str:
    """Load actor, critic and V_target weights (nothing else) from a run's newest checkpoint."""
    path = tf.train.latest_checkpoint(str(run.checkpoints))
    if path is None:
        raise CheckpointError(f"no checkpoint in {run.checkpoints}")
    check_layout(path)
    try:
        tf.train.Checkpoint(**_model_objects(nets)).restore(path).expect_partial() \
            .assert_existing_objects_matched()
    except _UNREADABLE as e:
        raise CheckpointError(f"cannot load {path}: {_first_line(e)}") from None
    return path


def read_counters(path: str) -> dict:
    """A checkpoint's driver Counters (env_steps, updates, ...) without building anything."""
    reader = tf.train.load_checkpoint(path)
    prefix = "train_state/counters/"
    return {name[len(prefix):].split("/")[0]: reader.get_tensor(name).item()
            for name in reader.get_variable_to_shape_map() if name.startswith(prefix)}


def _first_line(e: BaseException) -> str:
    text = str(e).strip()
    return f"{type(e).__name__}: {text.splitlines()[0] if text else ''}"
