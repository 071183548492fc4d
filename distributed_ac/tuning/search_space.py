"""The search space and the metric of `dac tune`, read and checked before Ray starts.

A space is a YAML mapping of Config field -> one distribution:

    actor_lr: {loguniform: [1.0e-4, 1.0e-2]}
    entropy_coef: {choice: [0.0, 0.01]}
    gamma: {uniform: [0.95, 0.999]}
    num_envs: {grid: [8, 16]}

choice and grid take a list of values; uniform and loguniform take [low, high] (on an
int field they draw ints, high included). `start: value` beside a distribution makes
every trial start from that value, and the distribution is then only what PBT explores:

    actor_lr: {loguniform: [3.0e-5, 3.0e-3], start: 3.0e-3}   # all start 10x too high Every value, and both bounds of a range, must
make a valid Config over the base config, so a bad space is refused before any trial
starts. This module imports neither Ray nor TensorFlow; tuning/experiment.py turns a
SearchSpace into Ray Tune's distributions.
"""

from __future__ import annotations

import dataclasses
import math
import os
import typing
from pathlib import Path

import yaml

from distributed_ac.config.schema import FIELD_NAMES, Config, from_dict
from distributed_ac.core.errors import ConfigError, UsageError

KINDS = ("choice", "grid", "uniform", "loguniform")
# Fields a search cannot vary: they decide where and how long a trial runs, which the
# search itself sets (per-trial workers, the budget of --num-samples trials).
FIXED = ("serial",)

# The training mean every trial reports, and the evaluation mean when the config
# evaluates during training (the metric names of metrics.jsonl).
TRAIN_METRIC = "charts/mean_return_100"
EVAL_METRIC = "eval/mean_return"
# What each report of a trial holds besides the learner's metrics (run/metrics.py's
# LEARNER_KEYS), and what Tune adds to every result.
REPORTED = ("env_steps", "updates", "wall_s", "episodes", TRAIN_METRIC)
TUNE_ADDS = ("training_iteration", "time_total_s", "time_this_iter_s", "timesteps_total")


@dataclasses.dataclass(frozen=True)
class Dimension:
    field: str
    kind: str  # one of KINDS
    values: tuple  # choice/grid: the values; uniform/loguniform: (low, high)
    integer: bool  # an int field: ranges draw ints
    start: object = None  # every trial's first value (PBT explores from it); None: drawn


SearchSpace = dict[str, Dimension]


def load_space(path: str | os.PathLike, base: Config) -> SearchSpace:
    """Read and check a search-space YAML file against `base` (errors are ConfigError)."""
    p = Path(path)
    try:
        data = yaml.safe_load(p.read_text())
    except OSError as e:
        raise ConfigError(f"cannot read search space {p}: {e.strerror or e}") from None
    except yaml.YAMLError:
        raise ConfigError(f"search space {p} is not valid YAML") from None
    return parse_space(data, base, where=str(p))


def parse_space(data, base: Config, where: str = "search space") -> SearchSpace:
    """A SearchSpace from a mapping field -> {kind: values}, each checked against `base`."""
    if not data:
        raise ConfigError(f"{where} is empty: give at least one field to search over")
    if not isinstance(data, dict):
        raise ConfigError(f"{where} must be a mapping of config field: {{kind: values}}")
    unknown = sorted(set(data) - set(FIELD_NAMES))
    if unknown:
        raise ConfigError(f"{where}: unknown config field(s): {', '.join(map(str, unknown))}")
    fixed = sorted(set(data) & set(FIXED))
    if fixed:
        raise ConfigError(f"{where}: {', '.join(fixed)} cannot be searched over")
    return {name: _dimension(name, spec, base, where) for name, spec in data.items()}


def _dimension(name: str, spec, base: Config, where: str) -> Dimension:
    spec = dict(spec) if isinstance(spec, dict) else spec
    start = spec.pop("start", None) if isinstance(spec, dict) else None
    if not isinstance(spec, dict) or len(spec) != 1 or next(iter(spec)) not in KINDS:
        raise ConfigError(f"{where}: {name} must be one of {{{': ..., '.join(KINDS)}: ...}}"
                          " (and optionally start: value)")
    kind, values = next(iter(spec.items()))
    if start is not None and kind == "grid":
        raise ConfigError(f"{where}: {name}: a grid visits every value; start goes with "
                          "choice, uniform or loguniform")
    if not isinstance(values, list) or not values:
        raise ConfigError(f"{where}: {name}: {kind} needs a non-empty list")
    hint = typing.get_type_hints(Config)[name]
    integer = hint is int
    if kind in ("uniform", "loguniform"):
        values = _range(name, kind, values, integer, where)
    for v in (*values, *([start] if start is not None else [])):  # each must make a
        try:                                                          # valid Config
            from_dict({name: v}, base)
        except ConfigError as e:
            raise ConfigError(f"{where}: {name}: {e}") from None
    return Dimension(name, kind, tuple(tuple(v) if isinstance(v, list) else v for v in values),
                     integer, start)


def _range(name: str, kind: str, values: list, integer: bool, where: str) -> list:
    numbers = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values)
    if len(values) != 2 or not numbers or not values[0] < values[1]:
        raise ConfigError(f"{where}: {name}: {kind} needs [low, high] with low < high")
    if kind == "loguniform" and values[0] <= 0:
        raise ConfigError(f"{where}: {name}: loguniform needs low > 0")
    if integer and not all(float(v).is_integer() for v in values):
        raise ConfigError(f"{where}: {name} is an int field: its bounds must be ints")
    return [int(v) for v in values] if integer else [float(v) for v in values]


def grid_size(space: SearchSpace) -> int:
    """Trials one pass over the grid dimensions takes (1 without any)."""
    return math.prod(len(d.values) for d in space.values() if d.kind == "grid")


def evaluates(cfg: Config) -> bool:
    """Whether the config evaluates the policy during training (--eval-every)."""
    return cfg.eval_every > 0


def default_metric(cfg: Config) -> str:
    """The evaluation mean when the trials evaluate, else the 100-episode training mean."""
    return EVAL_METRIC if evaluates(cfg) else TRAIN_METRIC


def reported_metrics(cfg: Config) -> tuple[str, ...]:
    """Every metric name a trial of `cfg` reports to Tune."""
    from distributed_ac.run.metrics import LEARNER_KEYS

    extra = (EVAL_METRIC,) if evaluates(cfg) else ()
    return (*REPORTED, *extra, *LEARNER_KEYS, *TUNE_ADDS)


def check_metric(metric: str, cfg: Config) -> None:
    """UsageError unless some trial of `cfg` reports `metric`."""
    known = reported_metrics(cfg)
    if metric not in known:
        why = (" (the trials do not evaluate during training)" if metric == EVAL_METRIC else "")
        raise UsageError(f"--metric {metric}: no trial reports it{why}; choose one of "
                         f"{', '.join(known)}")
