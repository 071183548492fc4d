"""The run directory: the one place a `dac train` writes, and what the other commands read.

    RUN_DIR/
      config.yaml     the resolved Config (safe YAML: reading it never runs code)
      plan.yaml       the run plan: workers, sub-envs each, learner batch (plan.py)
      checkpoints/    TensorFlow checkpoints ckpt-<updates>.index / .data-*, and TF's
                      `checkpoint` state file naming the newest (checkpoint.py)
      tb/             TensorBoard event files, step = env steps (metrics.py)
      metrics.jsonl   the same scalars, one JSON object per logged row (metrics.py)
      best/           with eval_every: the networks of the best evaluation so far, as a
                      TensorFlow checkpoint best-<n>, and best.json, its score and update
      wandb_id        with --wandb: the W&B run's id, which a resume logs to (wandb_sink.py)

This module knows the layout and the rules for starting, replacing and resuming a run;
it imports neither TensorFlow nor Ray, so the CLI can check a run directory (and `dac
plot` can read one) before anything heavy loads. (Only `readable_checkpoint`, which a
resume calls once TensorFlow is loaded anyway, imports TensorFlow.)
"""

from __future__ import annotations

import dataclasses
import fcntl
import json
import os
import re
import shutil
import time
from pathlib import Path

from distributed_ac.config.schema import FIELD_NAMES, Config, dump_yaml, from_dict, read_mapping
from distributed_ac.core.errors import CheckpointError, ConfigError, RunDirError
from distributed_ac.run.files import named

# Changing any of these changes the networks a checkpoint holds, so a resume refuses it.
NETWORK_FIELDS = ("env", "topology", "torso", "hidden_sizes", "activation", "core", "core_size",
                  "observe_action_mask", "critic_input")  # the last two set input widths
# ... and these change what else it holds, or the networks' inputs: the observation and
# return statistics, the minibatch shuffle's generator (policy_loss clip), the shape of
# what the env's observations become, the set of policies. A checkpoint without them
# would restore "successfully" and drop them (a restore matches the objects it is given,
# not those it holds), or fail after the run directory was written.
STATE_FIELDS = NETWORK_FIELDS + ("normalize_obs", "normalize_reward", "policy_loss",
                                 "frame_size", "categorical_obs", "grayscale", "frame_stack",
                                 "agent_id", "text_obs", "policy_mapping", "self_play")


@dataclasses.dataclass(frozen=True)
class RunDir:
    path: Path

    @property
    def config(self) -> Path:
        return self.path / "config.yaml"

    @property
    def plan(self) -> Path:
        return self.path / "plan.yaml"

    @property
    def checkpoints(self) -> Path:
        return self.path / "checkpoints"

    @property
    def tensorboard(self) -> Path:
        return self.path / "tb"

    @property
    def metrics(self) -> Path:
        return self.path / "metrics.jsonl"

    @property
    def best(self) -> Path:
        return self.path / "best"

    @property
    def best_record(self) -> Path:
        return self.best / "best.json"

    @property
    def startup_log(self) -> Path:
        return self.path / "startup.log"

    @property
    def wandb_id(self) -> Path:
        return self.path / "wandb_id"

    def entries(self) -> list[Path]:
        return [self.config, self.plan, self.checkpoints, self.tensorboard, self.metrics,
                self.best, self.startup_log, self.wandb_id]

    def keep_startup_lines(self, lines: list[str]) -> None:
        """Append the start-up lines kept off the console (TensorFlow's notices)."""
        if lines:
            with named(self.startup_log), open(self.startup_log, "a", encoding="utf-8") as f:
                f.writelines(lines)

    def read_best(self) -> dict | None:
        """best.json (the best evaluation's score, update and checkpoint), or None: no
        evaluation has been kept, or the file cannot be read (a new best replaces it)."""
        try:
            record = json.loads(self.best_record.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        return record if isinstance(record, dict) and "mean_return" in record else None

    def write_best(self, record: dict) -> None:
        """Write best.json atomically (a crash leaves the old record or the new one)."""
        tmp = self.best_record.with_suffix(".json.tmp")
        with named(tmp):
            tmp.write_text(json.dumps(record) + "\n", encoding="utf-8")
        os.replace(tmp, self.best_record)

    def has_checkpoint(self) -> bool:
        return bool(listed_checkpoints(self.checkpoints))

    def write_config(self, cfg: Config) -> None:
        """Write config.yaml atomically (a crash leaves the old file or the new one)."""
        tmp = self.config.with_suffix(".yaml.tmp")
        try:
            with named(self.config):
                dump_yaml(cfg, tmp, header=CONFIG_HEADER.format(len(FIELD_NAMES)))
        except OSError:
            tmp.unlink(missing_ok=True)
            raise
        os.replace(tmp, self.config)


class RunLock:
    """The one writer's hold on a run directory, for as long as its process runs.

    An exclusive flock on the directory itself, not on a lock file: nothing joins the
    run's layout, --overwrite (which removes the run's entries) cannot remove it, and no
    file is left behind to go stale. The kernel drops the lock when the holder's process
    dies, SIGKILL included, so a killed run's directory can be resumed at once. The
    descriptor is not inherited by what the run starts (Python opens it close-on-exec),
    so a Ray process outliving the driver does not keep the run locked.
    """

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        self._fd: int | None = None

    def acquire(self) -> None:
        """Take the lock, if the directory exists yet (new_run takes it once it has made
        it); RunDirError if another process holds it."""
        if self._fd is not None or not self.path.is_dir():
            return
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_DIRECTORY)
        except OSError:  # unreadable: the checks that follow refuse it, with its reason
            return
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise RunDirError(f"{self.path} is in use by another dac train still running there; "
                              "wait for it to end (or stop it), or choose another "
                              "--run-dir") from None
        self._fd = fd

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing the last descriptor drops the flock
            self._fd = None

    def __enter__(self) -> "RunLock":
        self.acquire()
        return self

    def __exit__(self, *exc) -> None:
        self.release()


# TF's `checkpoint` state file: text protobuf, one `field: value` a line.
_STATE_LINE = re.compile(r'^(model_checkpoint_path|all_model_checkpoint_paths): "([^"\n]+)"$'
                         r"|^(all_model_checkpoint_timestamps|last_preserved_timestamp): [0-9.e+-]+$")


def listed_checkpoints(directory: Path, name: str = "ckpt") -> list[str]:
    """The checkpoint prefixes in `directory`, oldest first: those TF's state file names
    (it is written last and atomically, so it names only complete ones), or, where that
    file is missing or garbled, every <name>-N with an .index, in the order of N (a
    restore still reads each before it trusts it)."""
    try:
        lines = (directory / "checkpoint").read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError):
        lines = []
    matches = [_STATE_LINE.match(ln) for ln in lines if ln.strip()]
    if matches and all(matches):
        newest = [m.group(2) for m in matches if m.group(1) == "model_checkpoint_path"]
        named = [m.group(2) for m in matches if m.group(1) == "all_model_checkpoint_paths"]
        named = [p for p in named if p not in newest] + newest  # newest last, as TF keeps it
        if newest:
            return [str(directory / p) for p in named]
    numbered = re.compile(rf"{re.escape(name)}-(\d+)\.index$")
    found = [(int(m.group(1)), str(directory / f.name[:-len(".index")]))
             for f in (directory.iterdir() if directory.is_dir() else ())
             if (m := numbered.match(f.name))]
    return [path for _, path in sorted(found)]


def default_path(env: str, root: str | os.PathLike = "runs") -> Path:
    """runs/<env>-<local time>, with an entry point's ':' and '/' made file-name safe; a
    numeric suffix keeps two runs started in the same second apart."""
    base = Path(root) / f"{re.sub(r'[^A-Za-z0-9._-]+', '_', env)}-{time.strftime('%Y%m%d-%H%M%S')}"
    path, n = base, 1
    while path.exists():
        n += 1
        path = base.with_name(f"{base.name}-{n}")
    return path


def check_new(path: str | os.PathLike, overwrite: bool = False) -> RunDir:
    """Refuse a fresh run at `path` that new_run would refuse; writes nothing."""
    run = RunDir(Path(path))
    if run.path.exists() and not run.path.is_dir():
        raise RunDirError(f"run directory {run.path} exists and is not a directory")
    if not overwrite and any(p.exists() for p in run.entries()):
        raise RunDirError(f"{run.path} already holds a run; continue it with --resume {run.path} "
                          "or replace it with --overwrite")
    blocked = unwritable_ancestor(run.path)
    if blocked:
        raise RunDirError(f"cannot create run directory {run.path}: {blocked} is not writable")
    return run


def unwritable_ancestor(path: Path) -> Path | None:
    """The nearest existing ancestor of `path` (or `path` itself), if this user cannot
    create entries in it; None if `path` and any missing parents can be created there."""
    anc = path.absolute()
    while not anc.exists():
        anc = anc.parent
    return None if anc.is_dir() and os.access(anc, os.W_OK | os.X_OK) else anc


def new_run(path: str | os.PathLike, cfg: Config, overwrite: bool = False,
            lock: RunLock | None = None) -> RunDir:
    """Create a run directory for a fresh run and write its config.

    An existing run there is refused unless `overwrite`, which removes only the run's
    own entries (never anything else a user keeps in that directory). `lock` (the run's
    RunLock) is taken once the directory exists, before anything in it is removed.
    """
    run = check_new(path, overwrite)
    try:
        run.path.mkdir(parents=True, exist_ok=True)
    except OSError as e:  # e.g. /proc, or a read-only mount os.access did not see
        raise RunDirError(f"cannot create run directory {run.path}: {e.strerror}") from None
    if lock is not None:
        lock.acquire()
        check_new(path, overwrite)  # a run that started there meanwhile now holds it
    for p in run.entries():
        if p.exists():
            shutil.rmtree(p) if p.is_dir() else p.unlink()
    try:
        run.write_config(cfg)
    except OSError as e:  # e.g. /proc, a read-only mount os.access did not see, a full disk
        raise RunDirError(f"cannot create run directory {run.path}: cannot write "
                          f"{e.filename}: {e.strerror}") from None
    return run


def open_run(path: str | os.PathLike, need_checkpoint: bool = True) -> RunDir:
    """An existing run directory (with a checkpoint of this version's layout, unless told
    that none is needed)."""
    run = RunDir(Path(path))
    if not run.path.is_dir():
        raise RunDirError(f"run directory {run.path} does not exist")
    if not run.config.is_file():
        raise RunDirError(f"{run.path} is not a run directory (no config.yaml)")
    if need_checkpoint and not run.has_checkpoint():
        raise RunDirError(f"{run.path} has no checkpoint yet (nothing in {run.checkpoints})")
    if need_checkpoint:
        check_layout(run)
    return run


def open_trained(path: str | os.PathLike, best: bool = False) -> RunDir:
    """A run to read a trained policy from: its newest checkpoint, or with `best` the
    best evaluation's (best/), which only runs trained with eval_every keep."""
    run = open_run(path, need_checkpoint=not best)
    if best and not listed_checkpoints(run.best, "best"):
        raise RunDirError(f"no checkpoint in {run.best} (a run keeps one only when trained "
                          "with --eval-every)")
    return run


# config.yaml's first line: how many fields the run was started with, so that a file
# that lost lines is refused rather than resumed (or evaluated) on defaults. A file
# without it (written before it existed) is read as it is.
CONFIG_HEADER = "# distributed_ac run config of {} fields (resume, evaluate and export need every one)\n"
_HEADER = re.compile(r"# distributed_ac run config of (\d+) fields")


def predates_reading(path) -> bool:
    """Whether the run at `path` began before how its image is read was settled into its
    config.yaml (frame_size 0 and categorical_obs null there), so that a resume reads the
    env as it did; False when there is no readable run (check_resume then says why)."""
    try:
        saved = saved_config(open_run(path))
    except Exception:  # reported in one line by check_resume, under the run's lock
        return False
    return saved.frame_size == 0 and saved.categorical_obs is None


def saved_config(run: RunDir) -> Config:
    """The Config a run was trained with (safe YAML loading; errors are one line)."""
    try:
        data = read_mapping(run.config)
        header = _HEADER.match(run.config.read_text(encoding="utf-8"))
        if header and len(set(data) & set(FIELD_NAMES)) < int(header.group(1)):
            missing = sorted(set(FIELD_NAMES) - set(data))
            raise ConfigError(f"{run.config} lacks field(s) the run was started with: "
                              f"{', '.join(missing)}; put them back (their values are not "
                              "the defaults' by necessity), or start a new run")
        return from_dict(data)
    except ConfigError as e:
        raise RunDirError(f"{run.path}: {e}") from None


def check_same_network(saved: Config, cfg: Config, where: Path) -> None:
    """Refuse a resume whose config would build different networks, or other state
    beside them, than the checkpoint's."""
    changed = [f"{f} {getattr(saved, f)!r} -> {getattr(cfg, f)!r}" for f in STATE_FIELDS
               if getattr(saved, f) != getattr(cfg, f)]
    if _kl_penalty(saved) != _kl_penalty(cfg):  # its adapted weight is kept only when on
        changed.append(f"kl_coef {saved.kl_coef!r} -> {cfg.kl_coef!r}")
    if changed:
        raise RunDirError(f"cannot resume {where} with a different network or checkpointed state "
                          f"({'; '.join(changed)}); start a new run instead")


def _kl_penalty(c: Config) -> bool:
    return c.policy_loss == "clip" and c.kl_coef > 0


def check_resume(path: str | os.PathLike, cfg: Config) -> RunDir:
    """Refuse a resume that resume_run would refuse; writes nothing."""
    run = open_run(path)
    check_same_network(saved_config(run), cfg, run.path)
    return run


# The variable every checkpoint of the model of named parts holds (checkpoint.py). Its
# name is a key of the checkpoint's .index table, so it can be looked for before
# TensorFlow loads (a resume is checked before Ray and TensorFlow start).
LAYOUT_MARKER = b"model_layout/.ATTRIBUTES"
TABLE_MAGIC = bytes.fromhex("57fb808b247547db")  # ends every complete .index table


def check_layout(run: RunDir) -> None:
    """CheckpointError when the newest checkpoint was written by 0.1 (no layout marker)."""
    newest = Path(listed_checkpoints(run.checkpoints)[-1])
    index = newest.with_name(newest.name + ".index")
    table = index.read_bytes() if index.is_file() else b""
    # a torn file is not judged here: the restore reports it as unreadable
    if table.endswith(TABLE_MAGIC) and LAYOUT_MARKER not in table:
        raise CheckpointError(f"{newest} was written by "
                              "distributed_ac 0.1, whose weights layout this version cannot "
                              "read; start a new run (or evaluate it with 0.1)")


def resume_run(path: str | os.PathLike, cfg: Config) -> RunDir:
    """Check that `cfg` may continue the run at `path` and that a checkpoint there can be
    read; writes nothing. The Trainer records `cfg` as the run's config only once its
    restore has succeeded: config.yaml never holds settings no checkpoint was trained
    with, and a resume that fails leaves the run directory as it was."""
    run = check_resume(path, cfg)
    readable_checkpoint(run)
    return run


def readable_checkpoint(run: RunDir) -> str:
    """The newest checkpoint named in the state file whose every tensor reads back (the
    reader checks each one's CRC), i.e. the one a restore will load; CheckpointError if
    none. Imports TensorFlow: call it only where TensorFlow is loaded anyway."""
    import tensorflow as tf

    for path in reversed(listed_checkpoints(run.checkpoints)):
        try:
            reader = tf.train.load_checkpoint(path)
            for name in reader.get_variable_to_shape_map():
                reader.get_tensor(name)
        except (tf.errors.OpError, ValueError, IndexError):  # missing, torn or corrupted
            continue
        return path
    raise CheckpointError(f"no readable checkpoint in {run.checkpoints}")
