"""The docs' results tables, built from benchmarks/results/ (generate.py's
`<!-- dac:results NAME -->` markers, and the README's table).

Learning tables are benchmarks/workers_sweep.py's own `table` and `peer_table` (one row
per env, flags and worker count: each seed's 100-episode mean, the median, the budget,
the wall time, the commit), over the runs of one topic; defaults_sweep.py's
`table_lines` writes the defaults' table. A topic measured in more than one file shows
the newest run of each env, flags, W and seed (`current`). Throughput tables read
`dac bench`'s JSON lines. Nothing here imports TensorFlow or Ray.
"""

from __future__ import annotations

import importlib.util
import json
import statistics
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "benchmarks" / "results"
CHOICES = "distributed_ac.envs.choices:"  # the action-space tasks' module


def _benchmark(name: str):
    """benchmarks/NAME.py as a module (benchmarks/ is a folder of scripts, no package)."""
    path = ROOT / "benchmarks" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"_dac_docs_{name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def load_jsonl(path: Path) -> list[dict]:
    if not path.exists():
        raise FileNotFoundError(f"results file {path} is missing")
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


def results_table(rows: list[dict], decimals: int | None = None) -> str:
    """Runs in workers_sweep.py's shape (env, workers, seed, flags, score, budget, wall
    time, commit, ...) as workers_sweep.py's markdown table."""
    return _lines(_benchmark("workers_sweep").table(rows, decimals))


def peer_results_table(rows: list[dict], decimals: int | None = None) -> str:
    """Ours (`who` "dac") against a peer (any other `who`), by workers_sweep.peer_table."""
    return _lines(_benchmark("workers_sweep").peer_table(rows, decimals))


def _lines(lines: list[str]) -> str:
    return "\n".join(lines) + "\n"


def current(*names: str, root: Path = RESULTS) -> list[dict]:
    """The runs of the files NAMES under `root` (workers_sweep.py's row shape), later
    files over earlier ones: a later run of the same env, flags, W and seed replaces the
    earlier one (as do its cell's runs that recorded no seed), so a table shows the
    newest measurement of each run and the older seeds nothing has re-measured."""
    runs: dict[tuple, dict] = {}
    for name in names:
        later = load_jsonl(root / name)
        cells = {_cell_key(r) for r in later}
        runs = {k: r for k, r in runs.items() if not (k[-1] is None and k[:-1] in cells)}
        runs.update({(*_cell_key(r), r.get("seed")): r for r in later})
    return list(runs.values())


def _cell_key(r: dict) -> tuple:
    return (r["env"], r["workers"], tuple(r.get("flags", ())))


# --- the topics -------------------------------------------------------------------------

def _quality() -> list[dict]:
    # benchmarks/quality.py runs ours at one worker and records no count
    return [{"workers": 1, **r} if r["who"] == "dac" else r
            for r in load_jsonl(RESULTS / "quality.jsonl")]


def workers_runs() -> list[dict]:
    """Every preset at 1 to 24 workers: the sweep, its re-runs at the sub-env seeding,
    and LunarLander's seeds 0-9 at W = 1 and 4 with the shared-trunk release."""
    return current("workers-sweep.jsonl", "workers-sweep-subenv-seeds.jsonl",
                   "lunarlander-w1-w4.jsonl")


def _masking() -> list[dict]:
    # benchmarks/notebook/action-spaces/masking.py: trained with the mask up to 95% of the optimum, and
    # with the mask ignored for the whole budget (the flags it adds); the peer is
    # sb3-contrib's MaskablePPO (benchmarks/peers/sb3_ppo.py)
    ours = [{"who": "dac", **r, "env": CHOICES + "MaskedChoice",
             "flags": ["--ignore-action-mask"] if r["mask"] == "ignored"
             else ["--stop-at-return", "15.2"]}
            for r in load_jsonl(RESULTS / "masking.jsonl")]
    peer = [{**r, "env": CHOICES + r["env"],
             "who": r.get("hyperparams", {}).get("algo", r["peer"])}
            for r in load_jsonl(RESULTS / "masking-maskableppo.jsonl")]
    return ours + peer


def _summaries(name: str, flags: list[str]) -> list[dict]:
    """A file of `dac train` summary lines, which record no seed, flags or commit: the
    flags the benchmark ran with (its notes page says) label them."""
    return [{**r, "flags": flags} for r in load_jsonl(RESULTS / name)]


def _spaces() -> str:
    """The action-space tasks of envs/choices.py, ours against a peer where one ran."""
    image = "benchmarks/spaces/image-vector.yaml"
    ours = (_summaries("multi-choice.jsonl", ["--config", "benchmarks/spaces/multi-choice.yaml"])
            # recorded before `--topology auto` shared a CNN's trunk: separate networks
            + _summaries("image-vector.jsonl", [f"(--config {image}; separate networks)"])
            + [r for r in load_jsonl(RESULTS / "cnn-shared-trunk.jsonl")
               if r["env"].startswith(CHOICES)])
    rows = [{"who": "dac", **r} for r in ours] + _masking()
    return peer_results_table(rows, decimals=2)


# Runs of suites.jsonl made on the default preset before Taxi and CliffWalking had
# presets of their own: what the presets were made for, not what the envs get now (their
# notes page keeps them)
SUPERSEDED = {("CliffWalking-v1", ("--total-env-steps", "300000")),
              ("Taxi-v4", ("--total-env-steps", "1000000", "--entropy-coef", "0.01"))}


def suites_runs() -> list[dict]:
    # cnn-shared-trunk.jsonl re-measured the CNN suites once a CNN's trunk was shared
    # suites-minigrid.jsonl re-measured MiniGrid once its grid's codes were read as categories
    return [r for r in current("suites.jsonl", "cnn-shared-trunk.jsonl", "suites-minigrid.jsonl")
            if not r["env"].startswith(CHOICES)
            and (r["env"], tuple(r["flags"])) not in SUPERSEDED]


def _suites() -> str:
    return results_table(suites_runs())


def _defaults() -> str:
    return _lines(_benchmark("defaults_sweep").table_lines(
        load_jsonl(RESULTS / "defaults-sweep.jsonl")))


# --- throughput: dac bench's records -------------------------------------------------------

PHASES = ("env", "worker", "learner", "broadcast", "e2e_sync", "e2e_async", "efficiency")
THROUGHPUT = ("cartpole-after.jsonl", "pipeline-efficiency-learner-threads-auto.jsonl",
              "pipeline-breakout.jsonl", "pipeline-1024-envs.jsonl")


def bench_table(names: tuple[str, ...] = THROUGHPUT, root: Path = RESULTS) -> str:
    """One row per env, W and envs a worker, one column per phase (the median of its
    rounds), from the last of NAMES that measured that row: env, worker and e2e in env
    steps/s, the learner in samples/s, a broadcast in ms, the pipeline efficiency with
    the stage that limits it."""
    rows: dict[tuple, list[dict]] = {}
    for name in names:
        got: dict[tuple, list[dict]] = {}
        for r in load_jsonl(root / name):
            got.setdefault((r["env"], r["workers"], r["envs_per_worker"]), []).append(r)
        rows.update(got)
    lines = ["| env | W | envs a worker | " + " | ".join(PHASES) + " | commit |",
             "| --- | --- | --- |" + " --- |" * (len(PHASES) + 1)]
    for (env, w, n), rs in sorted(rows.items()):
        cells = [_phase_cell([r for r in rs if r["phase"] == p]) for p in PHASES]
        commits = ", ".join(sorted({r["machine"]["commit"] for r in rs}))
        lines.append(f"| {env} | {w} | {n:,} | " + " | ".join(cells) + f" | {commits} |")
    return _lines(lines)


def _phase_cell(rs: list[dict]) -> str:
    if not rs:
        return "-"
    if rs[0]["phase"] == "broadcast":
        return f"{statistics.median(r['extra']['ms'] for r in rs):.1f} ms"
    value = statistics.median(r["value"] for r in rs)
    if rs[0]["phase"] == "efficiency":
        return f"{value:.2f} ({rs[0]['extra']['limited_by']})"
    return f"{value:,.0f}"


# --- the README's table -------------------------------------------------------------------

README_ENVS = ("CartPole-v1", "Acrobot-v1", "Pendulum-v1", "LunarLander-v3",
               "LunarLanderContinuous-v3", "Hopper-v5", "HalfCheetah-v5")
README_WORKERS = (1, 2, 4, 8)


# quality.jsonl's note on the runs of the preset as shipped, where it revised one
SHIPPED = {"HalfCheetah-v5": "(preset of 2nd revision: gamma 0.98, gae_lambda 0.92)"}


def preset_runs() -> list[dict]:
    """The runs of each shipped preset: the workers table's, and quality.py's one-worker
    runs (which record no commit) with the note of the revision that ships."""
    quality = [{**r, "flags": []} for r in _quality() if r["who"] == "dac"
               and r.get("flags", []) in ([], [SHIPPED.get(r["env"])])]
    return workers_runs() + quality


def by_env_and_workers(runs: list[dict], envs: dict[str, tuple[list[str], list[str]]],
                       workers: tuple[int, ...], cell, lead=(), tail=()) -> str:
    """One row per env of ENVS, one column per W of WORKERS (`cell` of that W's runs,
    "-" without any), then the budget and the commits the runs recorded. ENVS maps an
    env to its cells under the LEAD columns (after its name) and the TAIL ones (last)."""
    lines = ["| " + " | ".join(["env", *lead, *(f"W = {w}" for w in workers),
                                "env steps", "commit", *tail]) + " |",
             "|" + " --- |" * (len(lead) + len(workers) + len(tail) + 3)]
    for env, (first, last) in envs.items():
        mine = sorted((r for r in runs if r["env"] == env), key=lambda r: r.get("seed", 0))
        if not mine:
            continue
        cells = [cell(got) if got else "-"
                 for got in ([r for r in mine if r["workers"] == w] for w in workers)]
        commits = ", ".join(sorted({r["commit"] for r in mine if "commit" in r})) or "-"
        steps = f"{max(r['env_steps'] for r in mine):,}"
        lines.append("| " + " | ".join([env, *first, *cells, steps, commits, *last]) + " |")
    return _lines(lines)


def readme_table(rows: list[dict] | None = None) -> str:
    """The shipped presets at 1, 2, 4 and 8 workers: per env, the median 100-episode mean
    at each W (and how many runs), the budget and the commits the runs recorded. A
    serial run stands in for a Ray run (the same plan), so `--serial` is not a row of
    its own, nor is a budget set by flag; runs with other flags are left out."""
    rows = preset_runs() if rows is None else rows
    plain = [r for r in rows if not [f for f in r.get("flags", ())
                                     if f not in ("--serial", "--total-env-steps") and not f.isdigit()]]
    return by_env_and_workers(
        plain, {env: ([], []) for env in README_ENVS}, README_WORKERS,
        lambda got: f"{statistics.median(r['mean_return_100'] for r in got):.0f} ({len(got)})")


# The suites' presets as `dac train` announces them, and the figure each is read against
SUITES = {
    "MiniGrid-Empty-Random-5x5-v0": ("default (categories, MLP)", "rl-zoo PPO 0.97"),
    "MiniGrid-DoorKey-5x5-v0": ("default (categories, MLP)", "rl-zoo PPO 0.964 at 100k"),
    "MiniGrid-Unlock-v0": ("default (categories, MLP)", "rl-zoo PPO 0.963 at 100k"),
    "MiniGrid-KeyCorridorS3R1-v0": ("default (categories, MLP)", "rl-zoo PPO 0.949 at 500k"),
    "MiniGrid-MultiRoom-N2-S4-v0": ("default (categories, MLP)", "not in rl-zoo's table"),
    "MiniGrid-DoorKey-8x8-v0": ("default (categories, MLP)", "not in rl-zoo's table"),
    "MiniGrid-FourRooms-v0": ("default (categories, MLP; held out)", "rl-zoo PPO 0.573 at 5M"),
    "Taxi-v4": ("its own: the mask from `info`", "optimum 7.93"),
    "CliffWalking-v1": ("tabular (its kind's)", "optimum -13"),
    "FrozenLake-v1": ("tabular (its kind's)", "optimum 0.74"),
    "FrozenLake8x8-v1": ("tabular (its kind's)", "optimum 0.91"),
    "dm_control/cartpole-swingup-v0": ("default", "cleanRL PPO 641"),
    "popgym-RepeatPreviousEasy-v0": ("popgym's (LSTM)", "optimum 1.0"),
    "popgym-PositionOnlyCartPoleEasy-v0": ("popgym's (LSTM)", "optimum 1.0"),
    "MinAtar/Asterix-v1": ("default (small CNN)", "gymnax PPO ~15 at 10M"),
}


def suites_summary() -> str:
    """Each suite's env with its preset and reference: every run's 100-episode mean at
    W = 1 and 4, in seed order, from the same runs as the suites table."""
    score = _benchmark("workers_sweep")._score
    return by_env_and_workers(
        suites_runs(), {env: ([preset], [ref]) for env, (preset, ref) in SUITES.items()},
        (1, 4), lambda got: ", ".join(score(r["mean_return_100"]) for r in got),
        lead=("preset",), tail=("reference",))


# name -> the markdown of one table. Each topic has one current table; a file that
# re-measured runs of another comes after it in current().
RESULTS_TABLES = {
    "quality": lambda: peer_results_table(_quality()),
    "workers": lambda: results_table(workers_runs()),
    "defaults-sweep": _defaults,
    "suites": _suites,
    "spaces": _spaces,
    "throughput": bench_table,
    "readme": readme_table,
    "suites-summary": suites_summary,
}
