"""The Python API: train, load, evaluate and export a run without the command line.

TensorFlow and Ray are imported only inside these functions, so importing this module
(or the package) stays cheap.

A callback is a function called after each update with that update's metrics dict, or an
object with any of `on_update(metrics)`, `on_evaluation(metrics)` (the eval/* metrics, on
the update after an evaluation) and `on_checkpoint(path)` (the final checkpoint, once the
run has ended). Returning False ends the run cleanly: the final checkpoint is written and
the summary's `stopped_by` is "callback".
Callbacks run in the driver process, never on workers. Config.callbacks names more of
them as `module:attr` strings.

An env may be a Gymnasium id, a `module:attr` entry point, or a callable; a callable is
registered with Gymnasium under a generated id, which only this process knows: use it
with `serial=True`, or give Ray workers a `module:attr` string instead.
"""

from __future__ import annotations

import dataclasses
import functools
from os import PathLike as _PathLike
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Sequence, Union

from distributed_ac.core.errors import Interrupted, UsageError
from distributed_ac.training.callbacks import checkpointed, hook_for, resolved

if TYPE_CHECKING:  # the Config is imported when train runs
    from distributed_ac.config.schema import Config

PathLike = Union[str, _PathLike]


@dataclasses.dataclass(frozen=True)
class TrainResult:
    """What train returns: the run directory, the trainer's summary (the dict `dac train`
    prints) and, loaded on first use, the final policy."""

    run_dir: Path
    summary: dict

    @functools.cached_property
    def policy(self) -> "LoadedPolicy":
        """The run's newest checkpoint's policy (as `load(run_dir)`)."""
        return load(self.run_dir)


class LoadedPolicy:
    """A trained policy in NumPy (no Ray, no TensorFlow once loaded).

    act(obs [B, *obs_shape], state=None, deterministic=False) returns the env actions [B];
    a recurrent policy returns (actions, state), the state to pass to the next call
    (None: zeros, the first step of an episode)."""

    def __init__(self, policy, space, recurrent: bool):
        self._policy, self.space, self.recurrent = policy, space, recurrent
        import numpy as np

        self._rng = np.random.default_rng(0)

    def initial_state(self, batch: int):
        """The zero state of `batch` episodes (None for a feed-forward policy)."""
        if not self.recurrent:
            return None
        self._policy.reset_state(batch)
        return self._policy.state

    def act(self, obs: Any, state: Any = None, deterministic: bool = False) -> Any:
        """The env actions for a batch of observations.

        Args:
            obs: `[B, *obs_shape]` observations as the env gives them (a Dict
                observation: a dict of such arrays).
            state: a recurrent policy's state from the previous call; None (zeros) at an
                episode's first step. Opaque: pass back what the last call returned.
            deterministic: the greedy action instead of a sample.

        Returns:
            The actions `[B]` (a recurrent policy: `(actions, state)`).
        """
        n = len(obs)
        if self.recurrent:
            self._policy.state = state if state is not None else self.initial_state(n)
        _, action, _ = self._policy.act(self.space.as_batch(obs, n), self._rng, deterministic)
        return (action, self._policy.state) if self.recurrent else action


def load(run_dir: PathLike, best: bool = False, checkpoint: int | None = None) -> LoadedPolicy:
    """The policy of a run's newest readable checkpoint, in NumPy, without Ray.

    Args:
        run_dir: a directory `train` (or `dac train`) wrote.
        best: the best evaluation's checkpoint (best/, kept with `eval_every`) instead.
        checkpoint: ckpt-N of checkpoints/ (N: its update count) instead.
    """
    from distributed_ac.acting.policies import policy_for
    from distributed_ac.trained.load import load_trained

    cfg, space, nets, _ = load_trained(run_dir, best, checkpoint)
    policy = policy_for(cfg, space, nets.spec)
    policy.load(nets.weights())
    return LoadedPolicy(policy, space, nets.spec.recurrent)


def evaluate(run_dir: PathLike, episodes: int = 100, deterministic: bool = False,
             video: PathLike | None = None, seed: int | None = None, best: bool = False,
             opponent: str | None = None, checkpoint: int | None = None) -> dict:
    """Play a trained policy on fresh seeds and return what `dac evaluate` prints.

    Args:
        run_dir: a directory `train` wrote; its newest readable checkpoint is played.
        episodes: how many episodes; episode i is reset with seed `seed + i`.
        deterministic: the greedy action (argmax, or the Gaussian's mean) each step.
        video: a directory to record episodes 0, 1, 8, 27, ... to, one MP4 each, for
            Gymnasium and PettingZoo envs alike (needs moviepy).
        seed: the first episode's seed; default 2**31 + the training seed, above every
            seed training hands out.
        best: play the best evaluation's checkpoint (best/) instead.
        opponent: a self-play run: the fixed player its games are played against.
        checkpoint: play ckpt-N of checkpoints/ instead.

    Returns:
        dict: the checkpoint, env, env steps trained, mean, std, min, max and each
        episode's return (a self-play run's: its win rates too).
    """
    from distributed_ac.trained.evaluate import evaluate as play

    return play(run_dir, episodes, deterministic, video, seed, best, opponent, checkpoint)


def export(run_dir: PathLike, out_dir: PathLike, best: bool = False, policy: str | None = None,
           checkpoint: int | None = None, format: str = "savedmodel") -> dict:
    """Write a trained policy and value function for serving, as `dac export` does.

    Args:
        run_dir: a directory `train` wrote; its newest readable checkpoint is written.
        out_dir: a new or empty directory (or a previous export, replaced).
        best: write the best evaluation's checkpoint (best/) instead.
        policy: a run with separate policies: the one to write.
        checkpoint: write ckpt-N of checkpoints/ instead.
        format: "savedmodel" (out_dir is the SavedModel) or "onnx" (out_dir/saved_model
            plus out_dir/action.onnx and out_dir/value.onnx; needs the onnx extra).

    Returns:
        dict: the checkpoint, the SavedModel's path, the observation and action shapes
        it takes and gives (with "onnx": the ONNX files' paths too).
    """
    from distributed_ac.trained import onnx, savedmodel

    if format not in ("savedmodel", "onnx"):
        raise UsageError(f"export: format is savedmodel or onnx, not {format!r}")
    if format == "onnx":
        onnx.require_tf2onnx()
    saved = Path(out_dir) / "saved_model" if format == "onnx" else Path(out_dir)
    info = savedmodel.export(run_dir, saved, best, policy, checkpoint)
    if format == "onnx":
        info["onnx"] = onnx.convert(saved, out_dir)
    return info


def _env_name(env) -> str | None:
    """A callable env: registered with Gymnasium under a generated id."""
    if env is None or isinstance(env, str):
        return env
    if not callable(env):
        raise UsageError(f"env: a Gymnasium id, module:attr or a callable, not {env!r}")
    import gymnasium as gym

    name = f"dac-api/{getattr(env, '__name__', 'env')}-{id(env):x}-v0"
    if name not in gym.registry:
        gym.register(name, entry_point=env)
    return name


def _config(env: str | None, config, overrides: dict, no_preset: bool, resume):
    """(the run's Config, its preset line): the given Config, the resumed run's, or the
    env's preset (as dac train finds it), then the overrides (`env`, when given, among
    them)."""
    from distributed_ac.config.schema import Config, load_yaml

    if env is not None:
        overrides = {**overrides, "env": env}
    note = None
    if config is None and resume is not None:
        from distributed_ac.run.rundir import open_run, saved_config

        config = saved_config(open_run(resume))
    elif config is None:
        from distributed_ac.training.presets import preset_for, preset_note

        env = env or Config.env
        config = Config(env=env)
        packages = tuple(overrides.get("gym_packages", ()))
        preset, name = (None, "") if no_preset else preset_for(env, packages)
        if preset:
            config = dataclasses.replace(load_yaml(preset, config), env=env)
            note = preset_note(preset, name, env)
    fields = {f.name for f in dataclasses.fields(Config)}
    bad = sorted(set(overrides) - fields)
    if bad:
        raise UsageError(f"train: no Config field {', '.join(bad)}")
    return dataclasses.replace(config, **overrides), note


def train(env: str | Callable[..., Any] | None = None, config: Config | None = None,
          callbacks: Sequence[Any] | None = None, run_dir: PathLike | None = None, *,
          resume: PathLike | None = None,
          overwrite: bool = False, address: str | None = None, dashboard: bool = False,
          no_preset: bool = False, note: str | None = None, **overrides: Any) -> TrainResult:
    """Train a run until its env-step budget, `stop_at_return`, a stop signal or a
    callback ends it, and return its directory, summary and final policy.

    Args:
        env: a Gymnasium id, a `module:attr` entry point or a callable that makes the env
            (registered under a generated id: see the module's doc); default the config's.
        config: a `Config` to start from. Without one: the resumed run's config, else the
            env's preset as `dac train` finds it (its start-up line printed), else with
            `no_preset` the Config defaults.
        callbacks: objects, functions or `module:attr` strings (see the module's doc), run
            before those `Config.callbacks` names.
        run_dir: the directory the run writes (default runs/<env>-<time>).
        resume: a run directory to continue from its newest checkpoint (as
            `dac train --resume`).
        overwrite: replace the run already in `run_dir` instead of refusing.
        address: a Ray cluster to join (as `dac train --address`); default an embedded
            local Ray.
        dashboard: start Ray's dashboard (local Ray only).
        no_preset: start from the Config defaults, not the env's preset.
        note: a line printed once the run's checks pass (default: the preset's line).
        **overrides: Config fields by name (`serial=True`, `num_workers=4`, ...); a name
            that is not a field is one UsageError.

    Returns:
        TrainResult: `run_dir`, `summary` (the dict `dac train` prints) and `policy` (the
        final checkpoint's, loaded on first use).
    """
    cfg, preset_line = _config(_env_name(env), config, overrides, no_preset, resume)
    hooks = resolved((*(callbacks or ()), *cfg.callbacks))
    from distributed_ac.training.startup import shutdown_ray
    from distributed_ac.training.trainer import train as run

    try:
        summary = run(cfg, address=address, dashboard=dashboard, run_dir=resume or run_dir,
                      resume=resume is not None, overwrite=overwrite,
                      note=note or preset_line, on_update=hook_for(hooks))
    except (Interrupted, KeyboardInterrupt):
        # stopped during start-up: Ray's shutdown can wait on a half-started node for
        # longer than the stop timeout, so the caller says "interrupted" first, then ends Ray
        raise
    except BaseException:
        shutdown_ray()
        raise
    # before the caller prints: Ray's log forwarding may still print a worker's last words
    shutdown_ray()
    checkpointed(hooks, summary)
    return TrainResult(Path(summary.get("run_dir") or resume or run_dir), summary)
