"""Time to solve: wall seconds from this process's start until the 100-episode mean return
reaches the target (475 on CartPole-v1), the env steps used, and steps/s; one JSON line.

    python benchmarks/solve_time.py                                  # the package defaults
    python benchmarks/solve_time.py --config benchmarks/cartpole_fast.yaml
    python benchmarks/solve_time.py --config benchmarks/cartpole_fast.yaml --seed 3

Flags are `dac train`'s (the same parser); --stop-at-return defaults to 475 here and the
run directory to a temporary one. The clock starts when the kernel started this process
(before the interpreter loaded), so imports, ray.init, worker start, TensorFlow and the
first trace all count. `phases` splits the time:

    imports_s       process start -> train() called (Python, our package, gymnasium, tyro)
    learner_ready_s process start -> Learner built (ray.init, TensorFlow import, model build)
    workers_ready_s process start -> every Ray worker has started and reported
    first_update_s  process start -> the first update is done (first batch, tf.function trace)
    target_s        process start -> the target is reached (= wall_s)
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from distributed_ac.bench.phases import Recorder  # noqa: E402
from distributed_ac.bench.record import machine, process_age_s  # noqa: E402


class Timeline(Recorder):
    """Recorder whose times are seconds since process start; notes also go to stderr."""

    def __init__(self):
        super().__init__()
        self.offset = process_age_s() - time.monotonic()

    def note(self, message: str) -> None:
        super().note(message)
        print(f"[{self.notes[-1][0] + self.offset:6.2f}s] {message}", file=sys.stderr, flush=True)

    def at(self, t: float) -> float:
        return round(t + self.offset, 3)


def main(argv: list[str]) -> int:
    from distributed_ac.commands.train import parse_train_args
    from distributed_ac.config.schema import to_dict
    from distributed_ac.training.startup import shutdown_ray

    if not any(a == "--stop-at-return" or a.startswith("--stop-at-return=") for a in argv):
        argv = [*argv, "--stop-at-return", "475"]
    args = parse_train_args(argv)
    cfg = args.cfg
    timeline = Timeline()
    called = timeline.at(time.monotonic())
    from distributed_ac.training.trainer import train

    with tempfile.TemporaryDirectory(prefix="dac-solve-") as tmp:
        summary = train(cfg, address=args.address, progress=timeline,
                        run_dir=args.run_dir or os.path.join(tmp, "run"))
    shutdown_ray()  # no Ray log line may follow the JSON line on stdout
    ups, notes = timeline.updates, timeline.notes
    learner_note = next((t for t, m in notes if m.startswith("learner on")), None)
    worker_notes = [t for t, m in notes if m.startswith("worker ")]
    (t_first, s_first, _), (t_end, s_end, _) = ups[0], ups[-1]
    wall = timeline.at(t_end)
    train_s = t_end - t_first
    print(json.dumps({
        "benchmark": "solve_time", "env": cfg.env, "target": cfg.stop_at_return,
        "solved": summary["solved"], "wall_s": wall, "env_steps": summary["env_steps"],
        "updates": summary["updates"], "mean_return_100": summary["mean_return_100"],
        "steps_per_s": round(summary["env_steps"] / wall, 1),
        "train_steps_per_s": round((s_end - s_first) / max(train_s, 1e-9), 1),
        "phases": {"imports_s": called,
                   "learner_ready_s": timeline.at(learner_note) if learner_note else None,
                   "workers_ready_s": timeline.at(max(worker_notes)) if worker_notes else None,
                   "first_update_s": timeline.at(t_first), "target_s": wall},
        "mode": cfg.mode, "serial": cfg.serial, "seed": cfg.seed, "config": to_dict(cfg),
        "machine": machine()}), flush=True)
    return 0 if summary["solved"] else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
