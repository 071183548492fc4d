"""The flags of `dac bench`: every Config field (the env and model measured), plus the sweep."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Annotated, Literal, Optional

import tyro

from distributed_ac.config import Config, ConfigError, load_yaml

Phase = Literal["env", "worker", "learner", "broadcast", "e2e_sync", "e2e_async"]


@dataclasses.dataclass(frozen=True)
class BenchArgs:
    cfg: Annotated[Config, tyro.conf.arg(name="")]
    config: Optional[Path] = None
    """YAML file of config fields (env, model, batch shape); flags override it."""
    phases: tuple[Phase, ...] = ("env", "worker", "learner", "broadcast", "e2e_sync", "e2e_async")
    """Phases to measure, in this order."""
    sweep_workers: tuple[int, ...] = ()
    """Worker counts to sweep (default: --num-workers, or CPUs - 1 when that is 0)."""
    sweep_envs: tuple[int, ...] = ()
    """Envs per worker to sweep (default: --envs-per-worker)."""
    repeats: int = 3
    """Timed windows (env/worker/learner/broadcast) or training runs (e2e) per measurement; the median is reported."""
    min_time: float = 1.0
    """Seconds each timed window lasts at least."""
    e2e_updates: int = 150
    """Learner updates in each end-to-end run (the budget is this many batches)."""
    out: Optional[Path] = None
    """Append the JSON lines to this file too (they always go to stdout)."""
    png: Optional[Path] = None
    """Draw steps/s against workers, one line per phase, to this PNG."""
    compare: Optional[tuple[Path, Path]] = None
    """OLD.jsonl NEW.jsonl: print new/old per measurement and measure nothing."""
    gpu_sweep: bool = False
    """Learner-only samples/s on the GPU for --batch-sizes, then end to end; says 'no GPU' without one."""
    batch_sizes: tuple[int, ...] = tuple(1024 * 2 ** i for i in range(9))
    """Learner batch sizes (samples) for --gpu-sweep: 1k .. 256k."""

    def workers_list(self) -> tuple[int, ...]:
        return self.sweep_workers or (self.cfg.num_workers or max(1, (os.cpu_count() or 2) - 1),)

    def envs_list(self) -> tuple[int, ...]:
        return self.sweep_envs or (self.cfg.envs_per_worker,)


def _config_path(argv: list[str]) -> str | None:
    for i, a in enumerate(argv):
        if a == "--config" and i + 1 < len(argv):
            return argv[i + 1]
        if a.startswith("--config="):
            return a.split("=", 1)[1]
    return None


def parse_bench_args(argv: list[str]) -> BenchArgs:
    """Defaults, then the YAML file named by --config, then the flags."""
    path = _config_path(argv)
    base = load_yaml(path) if path else Config()
    args = tyro.cli(BenchArgs, default=BenchArgs(cfg=base), args=argv, prog="dac bench",
                    description="Measure env, worker, learner, broadcast and end-to-end throughput.")
    if min(args.workers_list()) < 1 or min(args.envs_list()) < 1:
        raise ConfigError("--sweep-workers and --sweep-envs must be >= 1")
    if args.repeats < 1 or args.min_time <= 0 or args.e2e_updates < 1:
        raise ConfigError("--repeats and --e2e-updates must be >= 1, --min-time > 0")
    return args
