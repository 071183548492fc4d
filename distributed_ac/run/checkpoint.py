"""Checkpoints: one tf.train.Checkpoint per save, kept by a CheckpointManager. No pickle.

Each part of a run saves and restores itself; the Checkpointer only orders and writes:
- the Learner's objects (Learner.checkpoint_objects): actor, critic and V_target, both
  optimizers (Adam's slots and `iterations`, the step both schedules read), the return
  and observation statistics, the shuffle generator and the learner's counters;
- the driver's RunState (its Counters, the recent-episode window behind the 100-episode
  mean, the reseed Generator's state as uint64 words), as a `TrainState` of variables;
- the pool's state (Pool.save_state / resume): envs cannot be saved in general, and a
  checkpoint never restarts them, so a serial pool keeps every action its workers took
  (`ckpt-K.workers.npz`, plain arrays read with allow_pickle=False) and a resume re-steps
  them, which rebuilds the very env states: K updates, then a resume for M more, equal
  K+M updates in one go, bit for bit. Ray workers restart their envs from seeds drawn
  from the checkpointed reseed Generator (episodes under way are lost; nothing else is).
Loading reads tensors only: no code runs.

Crash safety: the manager writes a new checkpoint's files under a new name first and
only then replaces TF's `checkpoint` state file (write, then rename) to name it, so a
crash mid-save leaves the previous checkpoint named and whole. `restore` also falls
back to an older checkpoint when the newest cannot be read. A save never reuses the
number of a checkpoint already named (it would overwrite the one usable copy).
"""

from __future__ import annotations

import logging
import os
import shutil
import zipfile
from pathlib import Path

import numpy as np
import tensorflow as tf

from distributed_ac.core.errors import CheckpointError
from distributed_ac.run.files import named
from distributed_ac.run.rundir import RunDir, listed_checkpoints

log = logging.getLogger(__name__)

# What TensorFlow raises for a missing, torn or mismatched checkpoint (a torn file can
# surface as an IndexError from the reader).
_UNREADABLE = (tf.errors.OpError, ValueError, AssertionError, IndexError)


class TrainState(tf.Module):
    """tf.Variables mirroring a state given as (nested) dicts of NumPy values of fixed
    shape (the driver's RunState.arrays()). It knows nothing of what they mean; its
    owner captures and reads it."""

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


class Checkpointer:
    """Orders and writes what the learner, the run state and the pool each save of
    themselves, in a run's checkpoints/; and brings them back on restore."""

    def __init__(self, run: RunDir, learner, state, keep: int, pool=None):
        self.learner, self.state, self.pool = learner, state, pool
        self.ckpt = tf.train.Checkpoint(**learner.checkpoint_objects(),
                                        train_state=state.checkpoint_object())
        self.run, self.keep = run, keep
        self.manager = self._manager()
        self.saved_at: int | None = None  # updates of the newest checkpoint written or read

    def _manager(self) -> tf.train.CheckpointManager:
        """TF's manager of checkpoints/ (it reads the state file as it is now)."""
        return tf.train.CheckpointManager(self.ckpt, str(self.run.checkpoints),
                                          max_to_keep=self.keep, checkpoint_name="ckpt")

    @property
    def latest(self) -> str | None:
        return self.manager.latest_checkpoint

    def save(self) -> str | None:
        """Write ckpt-<updates>; a no-op when that update is already checkpointed."""
        updates = self.state.counters.updates
        if updates == self.saved_at:
            return None
        self.learner.before_save()
        self.state.before_save()
        pool_state = self.pool.save_state() if self.pool is not None else None
        prefix = os.path.join(self.manager.directory, f"ckpt-{updates}")
        try:
            with named(prefix, (tf.errors.OpError,)):  # a full disk: one line naming it
                if pool_state is not None:  # written first: a named checkpoint has it
                    _write_npz(self._workers_file(prefix), pool_state)
                path = self.manager.save(checkpoint_number=updates)
        except OSError:
            self._remove_unnamed(prefix)
            raise
        self.saved_at = updates
        self._remove_orphan_worker_files()
        return path

    def _remove_unnamed(self, prefix: str) -> None:
        """What a failed save of `prefix` left (TF's `<prefix>_temp/`, a torn .index or
        .data, the workers' file): the state file still names the previous checkpoint."""
        if prefix in self.manager.checkpoints:  # never one a restore may read
            return
        shutil.rmtree(prefix + "_temp", ignore_errors=True)
        for f in Path(prefix).parent.glob(Path(prefix).name + ".*"):
            f.unlink(missing_ok=True)

    @staticmethod
    def _workers_file(checkpoint_path: str) -> Path:
        return Path(checkpoint_path + ".workers.npz")

    def _remove_orphan_worker_files(self) -> None:
        kept = {str(self._workers_file(p)) for p in self.manager.checkpoints}
        for f in Path(self.manager.directory).glob("*.workers.npz"):
            if str(f) not in kept:
                f.unlink(missing_ok=True)

    def _saved_pool_state(self, path: str) -> dict | None:
        """The pool's saved arrays beside `path`, or None (none saved, or unreadable)."""
        f = self._workers_file(path)
        if not f.exists():
            return None
        try:
            with np.load(f, allow_pickle=False) as data:
                return dict(data)
        except (OSError, ValueError, zipfile.BadZipFile) as e:  # torn or damaged
            log.warning("%s cannot be read (%s): the workers' envs restart from new seeds",
                        f.name, _first_line(e))
            return None

    def restore(self) -> str:
        """Load the newest readable checkpoint into the learner, the run state and the pool."""
        why = ""
        listed = listed_checkpoints(self.run.checkpoints)  # the state file's, or a scan's
        for path in reversed(listed):
            try:
                self.ckpt.restore(path).assert_existing_objects_matched()
            except _UNREADABLE as e:
                why = why or f" (the newest: {_first_line(e)})"
                log.warning("checkpoint %s cannot be restored (%s); trying an older one",
                            path, _first_line(e))
                continue
            if listed != list(self.manager.checkpoints):  # the state file is garbled or gone
                self._name_again(listed)
            self.learner.after_restore()
            self.state.after_restore()
            self.saved_at = self.state.counters.updates
            if self.pool is not None:
                self.pool.resume(self._saved_pool_state(path), self.state.draw_seeds)
            return path
        raise CheckpointError(f"no readable checkpoint in {self.manager.directory}{why}")

    def _name_again(self, listed: list[str]) -> None:
        """Write TF's state file naming the checkpoints a scan found, once one of them
        has restored: the manager then keeps and removes them (and their workers' files)
        as it does those it wrote itself, instead of losing track of them."""
        # with a time each, else the manager reads none of them back (it pairs the two lists)
        times = [os.path.getmtime(p + ".index") for p in listed]
        tf.compat.v1.train.update_checkpoint_state(
            str(self.run.checkpoints), listed[-1], all_model_checkpoint_paths=listed,
            all_model_checkpoint_timestamps=times, last_preserved_timestamp=min(times))
        self.manager = self._manager()
        log.warning("%s could not be read; found %d checkpoint(s) by their files and named "
                    "them in it again", self.run.checkpoints / "checkpoint", len(listed))


def _write_npz(path: Path, arrays: dict[str, np.ndarray]) -> None:
    """np.savez to a temporary name, then rename: a crash leaves no torn file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as f:
        np.savez(f, **arrays)
    os.replace(tmp, path)


def restore_networks(run: RunDir, objects: dict, best: bool = False,
                     number: int | None = None) -> str:
    """Load the networks' `objects` (networks.checkpoint_objects; nothing else) from a run's
    newest readable checkpoint (older ones stand in for one that cannot be read, as on
    resume), or from ckpt-`number` only; with `best`, from its best evaluation's (best/)."""
    where, name = (run.best, "best") if best else (run.checkpoints, "ckpt")
    paths = listed_checkpoints(where, name)
    if number is not None:
        chosen = [p for p in paths if Path(p).name == f"{name}-{number}"]
        if not chosen:
            have = ", ".join(Path(p).name for p in paths) or "none"
            raise CheckpointError(f"no checkpoint {name}-{number} in {where} (it holds: {have})")
        paths = chosen
    if not paths:
        raise CheckpointError(f"no checkpoint in {where}" + (
            " (a run keeps one only when trained with --eval-every)" if best else ""))
    why = ""
    for path in reversed(paths):
        try:
            tf.train.Checkpoint(**objects).restore(path).expect_partial() \
                .assert_existing_objects_matched()
        except _UNREADABLE as e:
            why = why or _first_line(e)
            log.warning("checkpoint %s cannot be read (%s); trying an older one", path, why)
            continue
        return path
    raise CheckpointError(f"cannot load {paths[-1]}: {why}" if len(paths) == 1 else
                          f"no readable checkpoint in {where} (the newest: {why})")


def read_counters(path: str) -> dict:
    """A checkpoint's driver Counters (env_steps, updates, ...) without building anything."""
    reader = tf.train.load_checkpoint(path)
    prefix = "train_state/counters/"
    return {name[len(prefix):].split("/")[0]: reader.get_tensor(name).item()
            for name in reader.get_variable_to_shape_map() if name.startswith(prefix)}


def _first_line(e: BaseException) -> str:
    text = str(e).strip()
    return f"{type(e).__name__}: {text.splitlines()[0] if text else ''}"
