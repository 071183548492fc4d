"""Run a benchmark suite: the entries of benchmarks/suites/SUITE.yaml, as `dac train` runs.

    python benchmarks/run_suite.py classic                      # every entry, W and seed
    python benchmarks/run_suite.py classic --only cartpole --seeds 0 --workers 1
    python benchmarks/run_suite.py minigrid --dry-run           # the commands, nothing run
    python benchmarks/run_suite.py --list                       # the suites and their entries

Each entry names an env, the Config fields it sets (`flags`), a `--config` file and
`--no-preset` where it needs them, the workers and seeds (else the suite's `defaults`),
its budget (`--total-env-steps`) and the reference it is read against. Each (entry, W,
seed) is one `dac train` in a fresh process (a fresh embedded Ray, as a user's run), one
at a time, and appends one JSON line to benchmarks/results/SUITE.jsonl (or --out): the
final 100-episode mean, env steps, updates, policy lag, wall seconds, the commit, the
versions of distributed_ac, TensorFlow, Gymnasium, Ray and the env's package, the
command and the reference. A run already in the file (same entry, W, seed and budget)
is skipped, so an interrupted suite continues where it stopped.

`--budget N` replaces every entry's budget (a smoke run); such a run is recorded with
its budget, so it never stands in for a full one. SUITE may also be a path to a YAML
file of the same shape (tests use one).
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
SUITES = ROOT / "benchmarks" / "suites"
RESULTS = ROOT / "benchmarks" / "results"
ENTRY_KEYS = {"name", "env", "package", "flags", "config", "no_preset", "workers", "seeds",
              "budget", "reference"}
# kept from `dac train`'s summary line: the same fields as workers_sweep.py's rows, so
# the docs' table formatters read a suite's results as they read the sweep's
SUMMARY_KEYS = ("env_steps", "updates", "mean_return_100", "batches_per_update",
                "policy_lag_p50", "policy_lag_p95", "max_policy_lag", "dropped_batches",
                "worker_wait_pct", "wall_s", "steps_per_s")
CORE_PACKAGES = ("distributed_ac", "tensorflow", "gymnasium", "ray")


class SuiteError(Exception):
    """Bad input: said in one line, and the script exits 2."""


def suite_path(name: str) -> Path:
    """SUITE as a name under benchmarks/suites/ or a path to a YAML file."""
    path = Path(name)
    if path.suffix in (".yaml", ".yml"):
        if not path.is_file():
            raise SuiteError(f"no suite file {name}")
        return path
    path = SUITES / f"{name}.yaml"
    if not path.is_file():
        raise SuiteError(f"no suite {name!r} (benchmarks/suites/ has: {', '.join(suite_names())})")
    return path


def suite_names() -> list[str]:
    return sorted(p.stem for p in SUITES.glob("*.yaml"))


def load_suite(name: str) -> dict:
    """The suite's YAML, checked for the keys the runner reads (not for what the flags
    mean: `dac train` checks those, and tests/unit/test_suites.py checks them against
    Config's fields)."""
    path = suite_path(name)
    try:
        suite = yaml.safe_load(path.read_text())
    except yaml.YAMLError as e:
        raise SuiteError(f"{path}: not YAML ({str(e).splitlines()[0]})") from None
    if not isinstance(suite, dict) or not isinstance(suite.get("entries"), list):
        raise SuiteError(f"{path}: a suite is a mapping with a list of entries")
    suite.setdefault("suite", path.stem)
    suite["path"] = path
    names = set()
    for i, entry in enumerate(suite["entries"]):
        _check_entry(path, i, entry)
        if entry["name"] in names:
            raise SuiteError(f"{path}: two entries named {entry['name']!r}")
        names.add(entry["name"])
    return suite


def _check_entry(path: Path, i: int, entry) -> None:
    if not isinstance(entry, dict):
        raise SuiteError(f"{path}: entry {i} is not a mapping")
    missing = [k for k in ("name", "env", "budget", "reference") if k not in entry]
    unknown = sorted(set(entry) - ENTRY_KEYS)
    if missing or unknown:
        said = "; ".join(x for x in (missing and f"missing {', '.join(missing)}",
                                     unknown and f"unknown key {', '.join(unknown)}") if x)
        raise SuiteError(f"{path}: entry {entry.get('name', i)!r}: {said}")
    if not isinstance(entry.get("flags", {}), dict):
        raise SuiteError(f"{path}: entry {entry['name']!r}: flags is a mapping of Config fields")


def flag_args(flags: dict) -> list[str]:
    """Config fields as `dac train` flags: a bool as --x / --no-x, a list as --x A B."""
    out: list[str] = []
    for field, value in flags.items():
        flag = "--" + field.replace("_", "-")
        if isinstance(value, bool):
            out.append(flag if value else "--no-" + flag[2:])
        elif isinstance(value, (list, tuple)):
            out += [flag, *map(str, value)]
        else:
            out += [flag, str(value)]
    return out


def entry_flags(entry: dict) -> list[str]:
    """What the entry adds to `dac train --env ENV --num-workers W --seed S`: the rows'
    `flags`, as workers_sweep.py records them (the budget is its own field)."""
    out = ["--no-preset"] if entry.get("no_preset") else []
    if entry.get("config"):
        out += ["--config", str(entry["config"])]
    return out + flag_args(entry.get("flags") or {})


def train_args(entry: dict, workers: int, seed: int, budget: int) -> list[str]:
    """The `dac train` arguments of one run, less the run directory."""
    return ["train", "--env", str(entry["env"]), "--num-workers", str(workers),
            "--seed", str(seed), "--total-env-steps", str(budget), *entry_flags(entry)]


def plan(suite: dict, only: list[str] | None, seeds: list[int] | None,
         workers: list[int] | None, budget: int | None) -> list[tuple[dict, int, int, int]]:
    """(entry, W, seed, budget) of every run, in file order; --only, --seeds, --workers
    and --budget override the file."""
    entries = suite["entries"]
    if only:
        known = {e["name"] for e in entries}
        unknown = [n for n in only if n not in known]
        if unknown:
            raise SuiteError(f"suite {suite['suite']} has no entry {', '.join(unknown)} "
                             f"(it has: {', '.join(sorted(known))})")
        entries = [e for e in entries if e["name"] in only]
    base = suite.get("defaults") or {}
    runs = []
    for e in entries:
        for w in workers or e.get("workers") or base.get("workers") or [1]:
            for s in seeds if seeds is not None else e.get("seeds", base.get("seeds", [0])):
                runs.append((e, int(w), int(s), int(budget or e["budget"])))
    return runs


def versions(package: str | None) -> dict[str, str]:
    """The installed versions of the core packages and the env's (distributed_ac's from
    the code that runs: a worktree on PYTHONPATH may be ahead of the installed one)."""
    import distributed_ac

    out = {"distributed_ac": distributed_ac.__version__}
    for name in (*CORE_PACKAGES[1:], *([package] if package else [])):
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            out[name] = "not installed"
    return out


def commit() -> str:
    out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                         text=True, cwd=ROOT)
    return out.stdout.strip() or "unknown"


def run_one(suite: dict, entry: dict, workers: int, seed: int, budget: int) -> dict:
    """One `dac train` in a fresh process; its summary line as the suite's record."""
    at = commit()  # what the run started from, should a commit land while it trains
    args = train_args(entry, workers, seed, budget)
    with tempfile.TemporaryDirectory(prefix="dac-suite-") as tmp:
        cmd = [sys.executable, "-m", "distributed_ac", *args, "--run-dir", f"{tmp}/run"]
        out = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
    if out.returncode != 0:
        last = (out.stderr.strip().splitlines() or ["(no output)"])[-1]
        raise RuntimeError(f"{entry['name']} W={workers} seed={seed}: dac train exited "
                           f"{out.returncode}: {last}")
    summary = json.loads(out.stdout.strip().splitlines()[-1])
    return {"suite": suite["suite"], "entry": entry["name"], "env": entry["env"],
            "workers": workers, "seed": seed, "flags": entry_flags(entry), "budget": budget,
            **{k: summary.get(k) for k in SUMMARY_KEYS}, "commit": at,
            "env_package": entry.get("package"), "versions": versions(entry.get("package")),
            "command": "dac " + shlex.join(args),
            "reference": entry["reference"], "time": time.strftime("%Y-%m-%dT%H:%M:%S%z")}


def done_runs(path: Path) -> set[tuple]:
    if not path.exists():
        return set()
    rows = [json.loads(x) for x in path.read_text().splitlines() if x.strip()]
    return {(r.get("entry"), r["workers"], r.get("seed"), r.get("budget")) for r in rows}


def results_path(suite: dict, out: Path | None) -> Path:
    return out or RESULTS / f"{suite['suite']}.jsonl"


def run_suite(args) -> int:
    suite = load_suite(args.suite)
    runs = plan(suite, args.only, args.seeds, args.workers, args.budget)
    if args.dry_run:
        for entry, w, s, b in runs:
            print("dac " + shlex.join(train_args(entry, w, s, b)))
        return 0
    out = results_path(suite, args.out)
    done = done_runs(out)
    for entry, w, s, b in runs:
        if (entry["name"], w, s, b) in done:
            print(f"skip {entry['name']} W={w} seed={s}: already in {out}", file=sys.stderr)
            continue
        rec = run_one(suite, entry, w, s, b)
        out.parent.mkdir(parents=True, exist_ok=True)
        with open(out, "a") as f:
            f.write(json.dumps(rec) + "\n")
        print(json.dumps(rec), flush=True)
    return 0


def list_suites() -> int:
    for name in suite_names():
        suite = load_suite(name)
        entries = ", ".join(e["name"] for e in suite["entries"])
        print(f"{name}: {suite.get('description', '')} [{entries}]")
    return 0


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="run_suite.py", description=__doc__.split("\n\n")[0])
    p.add_argument("suite", nargs="?", help="a name under benchmarks/suites/, or a YAML path")
    p.add_argument("--only", nargs="+", metavar="NAME", help="these entries alone")
    p.add_argument("--seeds", type=int, nargs="+", help="instead of the file's seeds")
    p.add_argument("--workers", type=int, nargs="+", help="instead of the file's workers")
    p.add_argument("--budget", type=int, help="env steps instead of each entry's budget")
    p.add_argument("--out", type=Path, help="results file (default benchmarks/results/SUITE.jsonl)")
    p.add_argument("--dry-run", action="store_true", help="print the commands, run nothing")
    p.add_argument("--list", action="store_true", help="the suites and their entries")
    return p


def main(argv: list[str]) -> int:
    args = parser().parse_args(argv)
    try:
        if args.list:
            return list_suites()
        if not args.suite:
            raise SuiteError("name a suite (--list shows them)")
        for name, values in (("--seeds", args.seeds), ("--workers", args.workers)):
            if values is not None and min(values) < (0 if name == "--seeds" else 1):
                raise SuiteError(f"{name} must be {'>= 0' if name == '--seeds' else '>= 1'}")
        if args.budget is not None and args.budget < 1:
            raise SuiteError("--budget must be >= 1")
        return run_suite(args)
    except SuiteError as e:
        print(f"run_suite: {e}", file=sys.stderr)
        return 2
    except RuntimeError as e:  # a run failed: the runs before it are in the file
        print(f"run_suite: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
