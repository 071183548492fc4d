"""The docs site and the README: the generated parts cover what they claim to (every
Config field, every subcommand's --help, the results tables), the README stays small
and keeps CI's set-up commands, and the prose carries no commit hashes or dates (a
results table carries its commits as a column; the dated notes record theirs)."""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import re
import sys
from pathlib import Path

import pytest

from distributed_ac.config.schema import Config

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
README = ROOT / "README.md"
README_LIMIT = 12_288
# The README's two set-up commands, which CI and a new user run as they are
SETUP_COMMANDS = (
    "python3 -m venv .venv && . .venv/bin/activate && pip install -e . && dac train --env CartPole-v1",
    'python3 -m venv .venv && . .venv/bin/activate && pip install -e ".[dev,atari,box2d,minigrid,minatar,popgym,multiagent,onnx,wandb]" && pytest',
)
HASH = re.compile(r"\b(?=[0-9a-f]*[0-9])(?=[0-9a-f]*[a-f])[0-9a-f]{7,40}\b")
MONTHS = "January|February|March|April|May|June|July|August|September|October|November|December"
DATE = re.compile(rf"\b(?:19|20)\d\d-(?:0[1-9]|1[0-2])(?:-\d\d)?\b|\b(?:{MONTHS}) (?:\d{{1,2}}, )?(?:19|20)\d\d\b")


def _load(name: str):
    """docs/hooks/NAME.py, as mkdocs loads a hook: by path."""
    sys.path.insert(0, str(DOCS / "hooks"))
    spec = importlib.util.spec_from_file_location(f"_docs_{name}", DOCS / "hooks" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


generate = _load("generate")
tables = _load("results_tables")


def prose_pages() -> list[Path]:
    """README and every docs page but the notes, whose investigations are dated and name
    the commits they measured."""
    pages = [p for p in DOCS.rglob("*.md") if "notes" not in p.relative_to(DOCS).parts]
    return [README, *sorted(pages)]


def prose_lines(path: Path):
    """(number, line) of a page's text outside tables (rows start with '|')."""
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.lstrip().startswith("|"):
            yield n, line


# --- the Config reference ---------------------------------------------------------------

def test_the_config_reference_has_a_row_for_every_field_with_its_flag_and_docstring():
    page = generate.expand("<!-- dac:config -->")
    for f in dataclasses.fields(Config):
        flag = "--" + f.name.replace("_", "-")
        rows = [r for r in page.splitlines() if r.startswith(f"| `{f.name}` | `{flag}` |")]
        assert len(rows) == 1, f"Config.{f.name}: {len(rows)} rows in the reference"
        help_text = generate._cell(generate.field_help(f.name))
        assert help_text and help_text in rows[0], f"Config.{f.name}: no docstring in its row"


def test_the_config_reference_page_asks_for_the_generated_table():
    assert "<!-- dac:config -->" in (DOCS / "reference" / "config.md").read_text()


# --- the command line -------------------------------------------------------------------

def test_the_cli_reference_names_every_subcommand_dac_help_lists():
    usage = generate.cli_help(None)
    listed = re.findall(r"^  (\w+)\s{2,}", usage.split("commands:")[1], re.MULTILINE)
    assert listed and tuple(listed) == generate.COMMANDS
    page = (DOCS / "reference" / "cli.md").read_text()
    for command in generate.COMMANDS:
        assert f"\n<!-- dac:cli {command} -->\n" in page, command
        assert f"\n## dac {command}\n" in page, command  # the anchor the guides link to


@pytest.mark.parametrize("command", generate.COMMANDS)
def test_the_cli_reference_contains_each_subcommands_help(command):
    block = generate.expand(f"<!-- dac:cli {command} -->")
    assert block.startswith("```text\n") and block.rstrip().endswith("```")
    assert f"usage: dac {command}" in block
    assert generate.cli_help(command) in block


def test_an_unknown_marker_stops_the_build():
    with pytest.raises(ValueError, match="unknown docs marker"):
        generate.expand("<!-- dac:results no-such-table -->")


# --- the results tables -----------------------------------------------------------------

def _run(env, workers, seed, score, commit, wall=10.0, flags=()):
    return {"env": env, "workers": workers, "seed": seed, "flags": list(flags),
            "env_steps": 1000, "updates": 10, "mean_return_100": score,
            "policy_lag_p95": 1, "max_policy_lag": 1, "dropped_batches": 0,
            "worker_wait_pct": 5.0, "wall_s": wall, "commit": commit}


def _write(path: Path, rows: list[dict]) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def test_a_results_table_gives_each_cell_its_seeds_median_and_commits(tmp_path):
    _write(tmp_path / "a.jsonl", [
        _run("Pendulum-v1", 2, 1, -300.0, "aaaaaa1", wall=20.0),
        _run("Pendulum-v1", 2, 0, -100.0, "aaaaaa1", wall=10.0),
        _run("Pendulum-v1", 2, 2, -200.0, "bbbbbb2", wall=30.0),
        _run("CartPole-v1", 1, 0, 500.0, "aaaaaa1", flags=["--serial"]),
    ])
    rows = tables.results_table(tables.current("a.jsonl", root=tmp_path)).splitlines()
    assert rows[0].startswith("| env (flags) | W | 100-episode mean per seed | median |")
    assert rows[0].endswith("| commit |")
    assert rows[2:] == [
        "| CartPole-v1 (--serial) | 1 | 500 (seeds 0) | 500 | 1,000 | 10 | 1 (1) | 0 | 5% | 10 | aaaaaa1 |",
        "| Pendulum-v1 | 2 | -100, -300, -200 (seeds 0, 1, 2) | -200 | 1,000 | 10 | 1 (1) | 0 | 5% "
        "| 20 | aaaaaa1, bbbbbb2 |",
    ]


def test_a_later_file_replaces_the_runs_it_measured_again(tmp_path):
    _write(tmp_path / "old.jsonl", [_run("Hopper-v5", 4, 0, 1000.0, "aaaaaa1"),
                                    _run("Hopper-v5", 4, 1, 2000.0, "aaaaaa1"),
                                    {**_run("Hopper-v5", 8, 0, 9.0, "aaaaaa1"), "seed": None}])
    _write(tmp_path / "new.jsonl", [_run("Hopper-v5", 4, 0, 3000.0, "ccccccc3"),
                                    _run("Hopper-v5", 8, 5, 7.0, "ccccccc3")])
    runs = tables.current("old.jsonl", "new.jsonl", root=tmp_path)
    got = sorted((r["workers"], r["seed"], r["mean_return_100"]) for r in runs)
    # seed 0 at W = 4 re-measured, seed 1 kept; W = 8's seedless run gives way to its cell's new one
    assert got == [(4, 0, 3000.0), (4, 1, 2000.0), (8, 5, 7.0)]


def test_a_peer_table_puts_the_peer_beside_ours_on_the_same_env(tmp_path):
    rows = [{**_run("MaskedChoice", 1, s, 15.0 + s, "ddddddd4"), "who": "dac"} for s in (0, 1)]
    rows += [{"who": "MaskablePPO", "env": "MaskedChoice", "seed": 0, "env_steps": 2000,
              "mean_return_100": 14.0, "wall_s": 5.0}]
    line = tables.peer_results_table(rows, decimals=2).splitlines()[2]
    assert line == ("| MaskedChoice | 1 | 15.00, 16.00 (seeds 0, 1) | 15.50 | 1,000 | 10 "
                    "| MaskablePPO | 14.00 (seeds 0) | 14.00 | 2,000 | 5 | ddddddd4 |")


def test_the_throughput_table_takes_each_row_from_the_newest_file(tmp_path):
    def rec(phase, value, commit, **extra):
        return {"phase": phase, "env": "CartPole-v1", "workers": 1, "envs_per_worker": 32,
                "value": value, "extra": extra, "machine": {"commit": commit}}
    _write(tmp_path / "old.jsonl", [rec("env", 1.0, "aaaaaa1"), rec("worker", 5.0, "aaaaaa1")])
    _write(tmp_path / "new.jsonl", [rec("worker", 100.0, "eeeeee5"), rec("worker", 300.0, "eeeeee5"),
                                    rec("broadcast", 0.0, "eeeeee5", ms=2.5),
                                    rec("efficiency", 0.8, "eeeeee5", limited_by="learner")])
    line = tables.bench_table(("old.jsonl", "new.jsonl"), root=tmp_path).splitlines()[2]
    assert line == "| CartPole-v1 | 1 | 32 | - | 200 | - | 2.5 ms | - | - | 0.80 (learner) | eeeeee5 |"


@pytest.mark.parametrize("name", sorted(tables.RESULTS_TABLES))
def test_every_results_table_builds_from_the_files_in_the_repository(name):
    table = tables.RESULTS_TABLES[name]().splitlines()
    assert len(table) > 2 and all(row.startswith("| ") for row in table)


def test_every_results_marker_in_the_docs_names_a_table():
    used = {m.group(2) for p in DOCS.rglob("*.md") for m in generate.MARKER.finditer(p.read_text())
            if m.group(1) == "results"}
    assert used and used <= set(tables.RESULTS_TABLES)


# --- the README -------------------------------------------------------------------------

def test_the_readme_is_small():
    assert README.stat().st_size <= README_LIMIT


def test_the_readme_and_getting_started_hold_the_set_up_commands_as_lines():
    for page in (README, DOCS / "getting-started.md"):
        lines = page.read_text(encoding="utf-8").splitlines()
        for command in SETUP_COMMANDS:
            assert command in lines, f"{page.name} lacks: {command}"


def test_the_readmes_results_table_is_the_generated_one():
    lines = README.read_text(encoding="utf-8").splitlines()
    head = tables.readme_table().splitlines()[0]
    start = lines.index(head)
    end = next(i for i in range(start, len(lines) + 1) if i == len(lines) or not lines[i].startswith("|"))
    assert "\n".join(lines[start:end]) + "\n" == tables.readme_table()


def test_the_readmes_links_reach_files_in_the_repository():
    text = README.read_text(encoding="utf-8")
    links = re.findall(r"\]\(([^)#\s]+)(?:#[^)\s]*)?\)", text)
    assert links
    for link in links:
        if not re.match(r"[a-z]+://", link):
            assert (ROOT / link).exists(), link


# --- the prose --------------------------------------------------------------------------

@pytest.mark.parametrize("page", prose_pages(), ids=lambda p: str(p.relative_to(ROOT)))
def test_the_prose_names_no_commit_and_no_date(page):
    found = [(n, m.group(0)) for n, line in prose_lines(page)
             for m in [*HASH.finditer(line), *DATE.finditer(line)]]
    assert not found, f"{page.relative_to(ROOT)}: {found}"


def test_the_prose_check_sees_a_commit_and_a_date(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("measured at a06d5f8 on 2026-12-03\n| a06d5f8 | in a table |\n"
                    "a deadbeef word, 1234567 steps, bfloat16\n")
    found = [m.group(0) for _, line in prose_lines(page)
             for m in [*HASH.finditer(line), *DATE.finditer(line)]]
    assert found == ["a06d5f8", "2026-12-03"]


def test_the_test_files_the_docs_name_exist():
    for page in [README, *DOCS.rglob("*.md")]:
        for path in re.findall(r"\btests/[\w/]+\.py\b", page.read_text(encoding="utf-8")):
            assert (ROOT / path).exists(), f"{page.relative_to(ROOT)} names {path}"
