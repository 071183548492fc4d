"""`dac bench`'s command line: its flags (every Config field, for the env and model measured,
plus the sweep), the sweep over workers x envs per worker, the GPU sweep, and main()."""

from __future__ import annotations

import dataclasses
import json
import os
import sys
from pathlib import Path
from typing import Annotated, Literal, Optional

import tyro

from distributed_ac.bench import report as bench_report
from distributed_ac.bench.phases import (
    broadcast_phase,
    e2e_phase,
    learner_phase,
    local_phase,
    pipeline_learner_phase,
)
from distributed_ac.commands.flags import check_writable, flag_value, parse_flags
from distributed_ac.config.plan import auto_workers
from distributed_ac.config.schema import Config, load_yaml
from distributed_ac.core.errors import UsageError
from distributed_ac.core.processes import exit_on_sigterm
from distributed_ac.envs.vector import resolved, space_for

Phase = Literal["env", "worker", "learner", "broadcast", "e2e_sync", "e2e_async"]


@dataclasses.dataclass(frozen=True)
class BenchArgs:
    cfg: Annotated[Config, tyro.conf.arg(name="")]
    config: Optional[Path] = None
    """YAML file of config fields (env, model, batch shape); flags override it."""
    phases: tuple[Phase, ...] = ("env", "worker", "learner", "broadcast", "e2e_sync", "e2e_async")
    """Phases to measure, in this order. With worker, learner and e2e_async, each (workers, envs) also gets its pipeline efficiency."""
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
    gpu_sweep: tyro.conf.FlagCreatePairsOff[bool] = False
    """Learner-only samples/s on the GPU for --batch-sizes, then end to end; says 'no GPU' without one."""
    batch_sizes: tuple[int, ...] = tuple(1024 * 2 ** i for i in range(9))
    """Learner batch sizes (samples) for --gpu-sweep: 1k .. 256k."""

    def workers_list(self) -> tuple[int, ...]:
        return self.sweep_workers or (self.cfg.num_workers
                                      or auto_workers(self.cfg, os.cpu_count() or 1, local=True),)

    def envs_list(self) -> tuple[int, ...]:
        return self.sweep_envs or (self.cfg.envs_per_worker or self.cfg.num_envs,)


def parse_bench_args(argv: list[str]) -> BenchArgs:
    """Defaults, then the YAML file named by --config, then the flags."""
    path = flag_value(argv, "--config")
    base = load_yaml(path) if path else Config()
    args = parse_flags(BenchArgs, argv, default=BenchArgs(cfg=base), prog="dac bench",
                       description="Measure env, worker, learner, broadcast and end-to-end throughput.")
    if min(args.workers_list()) < 1 or min(args.envs_list()) < 1:
        raise UsageError("--sweep-workers and --sweep-envs must be >= 1")
    if args.repeats < 1 or args.min_time <= 0 or args.e2e_updates < 1:
        raise UsageError("--repeats and --e2e-updates must be >= 1, --min-time > 0")
    for flag, path in (("--out", args.out), ("--png", args.png)):
        if path:  # before the sweep: its minutes are not lost to a path that fails at the end
            check_writable(Path(path), flag)
    for path in args.compare or ():
        if not os.path.isfile(path):
            raise UsageError(f"--compare {path}: no such file")
    return args


def sweep(cfg: Config, phases, workers_list, envs_list, repeats: int, min_time: float,
          e2e_updates: int, emit=print) -> list[dict]:
    """Every phase for every (workers, envs_per_worker); each record is emitted as it lands."""
    records = []
    space = None
    for n in envs_list:
        for w in workers_list:
            # W workers of n envs each, every worker's batch in each update
            c = dataclasses.replace(cfg, envs_per_worker=n, num_workers=w, num_envs=n * w,
                                    total_env_steps=max(cfg.total_env_steps,
                                                        n * w * cfg.rollout_length))
            cell = []
            for phase in phases:
                if phase in ("env", "worker"):
                    rec = local_phase(phase, c, w, repeats, min_time)
                elif phase == "learner":
                    space = space or space_for(c)
                    rec = pipeline_learner_phase(c, space, w, repeats, min_time)
                elif phase == "broadcast":
                    rec = broadcast_phase(c, w, repeats, min_time)
                else:
                    rec = e2e_phase(c, w, phase[4:], repeats, e2e_updates)
                cell.append(rec)
                emit(json.dumps(rec))
            # derived, once the cell has e2e_async, worker and learner
            for rec in bench_report.pipeline_efficiency(cell):
                cell.append(rec)
                emit(json.dumps(rec))
            records += cell
    return records


def gpu_sweep(cfg: Config, batch_sizes, repeats: int, min_time: float, emit=print) -> list[dict]:
    """Learner-only samples/s on the GPU for each batch size; [] (and a note) without one."""
    from distributed_ac.learning.tf_runtime import load_tensorflow

    tf = load_tensorflow()  # its C++ start-up lines held back (tf_runtime.py)
    if not tf.config.list_physical_devices("GPU"):
        print("no GPU: TensorFlow sees none, so the GPU sweep was skipped", file=sys.stderr)
        return []
    c = dataclasses.replace(cfg, device="gpu")
    space = space_for(c)
    records = []
    for b in batch_sizes:
        c_b = dataclasses.replace(c, envs_per_worker=max(1, b // c.rollout_length),
                                  num_envs=max(1, b // c.rollout_length),
                                  total_env_steps=max(c.total_env_steps, b))
        rec = learner_phase(c_b, space, b, repeats, min_time)
        records.append(rec)
        emit(json.dumps(rec))
    return records


def main(argv: list[str] | None = None) -> int:
    args = parse_bench_args(sys.argv[1:] if argv is None else argv)
    with exit_on_sigterm():  # phases' child processes and Ray stop with the command
        return _run(args)


def _run(args: BenchArgs) -> int:
    if args.compare:
        print(bench_report.compare_files(*args.compare))
        return 0
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
    out = open(args.out, "a") if args.out else None

    def emit(line: str) -> None:
        print(line, flush=True)
        if out:
            out.write(line + "\n")
            out.flush()

    cfg, _ = resolved(args.cfg)  # the image read as dac train reads it
    try:
        if args.gpu_sweep:
            records = gpu_sweep(cfg, args.batch_sizes, args.repeats, args.min_time, emit)
            if records:  # and end to end with the learner on the GPU
                records += sweep(dataclasses.replace(cfg, device="gpu"), ("e2e_async",),
                                 args.workers_list(), args.envs_list(), args.repeats,
                                 args.min_time, args.e2e_updates, emit)
        else:
            records = sweep(cfg, args.phases, args.workers_list(), args.envs_list(),
                            args.repeats, args.min_time, args.e2e_updates, emit)
    finally:
        if out:
            out.close()
    if records:
        print(bench_report.table(records), file=sys.stderr)
        for r in records:
            if "frames_per_s" in r["extra"]:
                rate = "samples/s" if r["phase"] == "learner" else "agent steps/s"
                print(f"{r['phase']} at {r['workers']} worker(s) x {r['envs_per_worker']} envs: "
                      f"{r['value']:,.0f} {rate} = {r['extra']['frames_per_s']:,.0f} frames/s "
                      f"(frame skip {r['extra']['frame_skip']})", file=sys.stderr)
            if r["phase"] == "efficiency":
                x = r["extra"]
                print(f"pipeline efficiency at {r['workers']} worker(s) x {r['envs_per_worker']} envs: "
                      f"{r['value']:.2f} (e2e_async {x['e2e_steps_per_s']:,.0f} / {x['limited_by']} "
                      f"{min(x['worker_steps_per_s'], x['learner_samples_per_s']):,.0f}; worker "
                      f"{x['worker_steps_per_s']:,.0f}, learner {x['learner_samples_per_s']:,.0f})",
                      file=sys.stderr)
    if args.png and records:
        print(f"plot: {bench_report.plot(records, args.png)}", file=sys.stderr)
    return 0
