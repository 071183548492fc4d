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
from pathlib import Path

from distributed_ac.core.errors import UsageError
from distributed_ac.training.callbacks import checkpointed, hook_for, resolved


@dataclasses.dataclass(frozen=True)
class TrainResult:
    """What train returns: the run directory, the trainer's summary, the final policy."""

    run_dir: Path
    summary: dict
    policy: "LoadedPolicy"


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

    def act(self, obs, state=None, deterministic: bool = False):
        n = len(obs)
        if self.recurrent:
            self._policy.state = state if state is not None else self.initial_state(n)
        _, action, _ = self._policy.act(self.space.as_batch(obs, n), self._rng, deterministic)
        return (action, self._policy.state) if self.recurrent else action


def load(run_dir, best: bool = False, checkpoint: int | None = None) -> LoadedPolicy:
    """The policy of a run's newest checkpoint (with `best`: the best evaluation's)."""
    from distributed_ac.acting.policies import policy_for
    from distributed_ac.commands.evaluate import load_trained

    cfg, space, nets, _ = load_trained(run_dir, best, checkpoint)
    policy = policy_for(cfg, space, nets.spec)
    policy.load(nets.weights())
    return LoadedPolicy(policy, space, nets.spec.recurrent)


def evaluate(run_dir, episodes: int = 100, **kwargs) -> dict:
    """What `dac evaluate` prints: see commands/evaluate.evaluate for the keywords."""
    from distributed_ac.commands.evaluate import evaluate as run

    return run(run_dir, episodes=episodes, **kwargs)


def export(run_dir, out_dir, **kwargs) -> dict:
    """What `dac export` does: a SavedModel at out_dir (commands/export.export)."""
    from distributed_ac.commands.export import export as run

    return run(run_dir, out_dir, **kwargs)


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


def _config(env: str | None, config, overrides: dict, no_preset: bool):
    """The run's Config: the given one, or the env's preset (as dac train), plus overrides
    (`env`, when given, among them)."""
    from distributed_ac.config.schema import Config, load_yaml

    if env is not None:
        overrides = {**overrides, "env": env}
    if config is None:
        env = env or Config.env
        config = Config(env=env)
        if not no_preset:
            from distributed_ac.commands.train import train_preset

            preset = train_preset(["--env", env])
            if preset:
                config = dataclasses.replace(load_yaml(preset, config), env=env)
    fields = {f.name for f in dataclasses.fields(Config)}
    bad = sorted(set(overrides) - fields)
    if bad:
        raise UsageError(f"train: no Config field {', '.join(bad)}")
    return dataclasses.replace(config, **overrides)


def train(env=None, config=None, callbacks=None, run_dir=None, overwrite=False,
          address=None, no_preset: bool = False, **overrides) -> TrainResult:
    """Train a run on `env` (default: the config's; a callable is registered, see the
    module's doc) from Config `config`, else the env's preset unless `no_preset`, then
    `overrides` of Config fields); return its directory, summary and final policy.
    `callbacks`: objects, functions or `module:attr` strings (see the module's doc), run
    before those Config.callbacks names."""
    cfg = _config(_env_name(env), config, overrides, no_preset)
    hooks = resolved((*(callbacks or ()), *cfg.callbacks))
    from distributed_ac.training.startup import shutdown_ray
    from distributed_ac.training.trainer import train as run

    try:
        summary = run(cfg, address=address, run_dir=run_dir, overwrite=overwrite,
                      on_update=hook_for(hooks))
    finally:
        shutdown_ray()
    checkpointed(hooks, summary)
    path = Path(summary.get("run_dir") or run_dir)
    return TrainResult(path, summary, load(path))
