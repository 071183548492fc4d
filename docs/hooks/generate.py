"""mkdocs hooks: the parts of the docs that are generated, not typed twice.

A page asks for a generated part with a marker on a line of its own:

    <!-- dac:config -->              the Config fields, one table per section of schema.py
    <!-- dac:cli train -->           `dac train --help` (any subcommand; `dac` alone: the usage)
    <!-- dac:results NAME -->        a results table from benchmarks/results/ (RESULTS_TABLES),
                                     under a caption naming the suite it measures

A results table's suites are those whose benchmarks/suites/SUITE.yaml lists it under
`tables` (NOT_A_SUITE says what made a table no suite runs). An unknown marker, a missing results file, a table no suite claims or a failing `--help`
stops the build.

Some pages link to files outside docs/ (cluster/README.md, the cluster walk-through),
by relative paths that work on GitHub. REPO_PAGES are also built as pages of the site,
under repo/, and such links are pointed at those pages, so that the strict build checks
them (their anchors too) and the site's links work; their own links into docs/ are
pointed at the site's pages the same way.

Field docstrings are read with tyro's own reader, as `dac train --help` reads them; the
tables of results with benchmarks/workers_sweep.py's and defaults_sweep.py's
formatters (results_tables.py, beside this file). Nothing here imports mkdocs at import time,
nor TensorFlow or Ray at all: tests/unit/test_docs.py imports this file.
"""

from __future__ import annotations

import dataclasses
import inspect
import json
import os
import posixpath
import re
import subprocess
import sys
from functools import lru_cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
COMMANDS = ("train", "evaluate", "export", "plot", "bench", "tune")
HELP_COLUMNS = "100"  # --help wraps at the terminal's width: fixed, the text is stable
REPO_PAGES = ("cluster/README.md", "benchmarks/peers/README.md")
REPO_PREFIX = "repo/"  # where REPO_PAGES land in the site
MARKER = re.compile(r"^<!--\s*dac:(\S+)(?:\s+(\S+))?\s*-->\s*$", re.MULTILINE)
LINK = re.compile(r"\]\(([^)\s]+?\.md)(#[^)\s]*)?\)")

for _path in (ROOT, Path(__file__).parent):  # the package, also where it is not
    if str(_path) not in sys.path:            # installed; results_tables.py beside this
        sys.path.insert(0, str(_path))

import yaml  # noqa: E402
from results_tables import RESULTS_TABLES  # noqa: E402  (needs the path above)

SUITES = ROOT / "benchmarks" / "suites"
# results tables that no suite's `dac train` runs make, and what does
NOT_A_SUITE = {"throughput": "`dac bench`'s records, not a suite (rerun: the commands "
                             "at the top of this page)"}


# --- the Config reference -------------------------------------------------------------

def config_sections() -> list[tuple[str, list[dataclasses.Field]]]:
    """Config's fields in source order, under the `# --- name ---` comments that divide
    schema.py's Config into sections; a field under none lands in "other"."""
    from distributed_ac.config import schema

    fields = {f.name: f for f in dataclasses.fields(schema.Config)}
    sections: list[tuple[str, list[dataclasses.Field]]] = []
    for line in inspect.getsource(schema.Config).splitlines():
        heading = re.match(r"\s+# --- (.+?) -+\s*$", line)
        if heading:
            sections.append((heading.group(1), []))
            continue
        name = re.match(r" {4}(\w+)\s*:", line)
        if name and name.group(1) in fields:
            if not sections:
                sections.append(("other", []))
            sections[-1][1].append(fields.pop(name.group(1)))
    if fields:
        sections.append(("other", list(fields.values())))
    return sections


def field_help(name: str) -> str:
    """A Config field's docstring, as tyro reads it for `dac train --help`."""
    from tyro._docstrings import get_field_docstring

    from distributed_ac.config.schema import Config

    return get_field_docstring(Config, name, ()) or ""


def config_rows() -> list[tuple[str, str]]:
    """(section, table row) for every Config field, in order."""
    from distributed_ac.config.schema import Config, to_dict

    defaults = to_dict(Config())
    rows = []
    for section, fields in config_sections():
        for f in fields:
            flag = "--" + f.name.replace("_", "-")
            cells = [f"`{f.name}`", f"`{flag}`", _code(str(f.type)),
                     _code(json.dumps(defaults[f.name])), _cell(field_help(f.name))]
            rows.append((section, "| " + " | ".join(cells) + " |"))
    return rows


def config_table() -> str:
    """The Config reference: one table per section (field, flag, type, package default,
    what it does)."""
    out, current = [], None
    for section, row in config_rows():
        if section != current:
            current = section
            out += ["", f"### {section[:1].upper()}{section[1:]}", "",
                    "| field | flag | type | default | what it does |",
                    "| --- | --- | --- | --- | --- |"]
        out.append(row)
    return "\n".join(out).strip() + "\n"


def _code(text: str) -> str:
    return "`" + text.replace("|", "\\|") + "`"


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


# --- the command line -----------------------------------------------------------------

@lru_cache(maxsize=None)
def cli_help(command: str | None) -> str:
    """`dac COMMAND --help` (`dac --help` for None) as a user sees it, at HELP_COLUMNS."""
    env = {**os.environ, "COLUMNS": HELP_COLUMNS, "NO_COLOR": "1", "TERM": "dumb"}
    env.pop("FORCE_COLOR", None)
    args = [sys.executable, "-m", "distributed_ac", *([command] if command else []), "--help"]
    out = subprocess.run(args, capture_output=True, text=True, cwd=ROOT, env=env, timeout=120)
    if out.returncode != 0 or not out.stdout.strip():
        raise RuntimeError(f"{' '.join(args[2:])} exited {out.returncode}: {out.stderr[-500:]}")
    return "\n".join(line.rstrip() for line in out.stdout.strip().splitlines())


def cli_block(command: str | None) -> str:
    return f"```text\n{cli_help(command)}\n```\n"


# --- the suites behind the results tables ---------------------------------------------

@lru_cache(maxsize=None)
def table_suites() -> dict[str, tuple[str, ...]]:
    """Results table -> the suites whose YAML lists it under `tables`, in name order."""
    out: dict[str, list[str]] = {}
    for path in sorted(SUITES.glob("*.yaml")):
        suite = yaml.safe_load(path.read_text())
        for table in suite.get("tables") or ():
            out.setdefault(table, []).append(suite.get("suite", path.stem))
    return {k: tuple(v) for k, v in out.items()}


def caption(table: str) -> str:
    """The line above a results table: the suites it comes from and how to rerun them,
    so a reader of the docs finds the YAML and the command behind each number."""
    suites = table_suites().get(table)
    if suites:
        named = ", ".join(f"{s} (`benchmarks/suites/{s}.yaml`)" for s in suites)
        return (f"*Suite{'s' if len(suites) > 1 else ''}: {named}; rerun: "
                f"`python benchmarks/run_suite.py {suites[0] if len(suites) == 1 else 'SUITE'}`.*")
    if table in NOT_A_SUITE:
        return f"*{NOT_A_SUITE[table]}.*"
    raise ValueError(f"results table {table!r} is in no suite's `tables` (benchmarks/suites/)")


# --- markers and links ------------------------------------------------------------------

def expand(markdown: str) -> str:
    """Every `<!-- dac:... -->` marker replaced by what it names."""
    def one(m: re.Match) -> str:
        kind, arg = m.group(1), m.group(2)
        if kind == "config" and arg is None:
            return config_table()
        if kind == "cli" and (arg is None or arg in COMMANDS):
            return cli_block(arg)
        if kind == "results" and arg in RESULTS_TABLES:
            return caption(arg) + "\n\n" + RESULTS_TABLES[arg]()
        raise ValueError(f"unknown docs marker {m.group(0)!r}")

    return MARKER.sub(one, markdown)


def repo_links(markdown: str, page_src: str) -> str:
    """Links by path in the repository, from the site page PAGE_SRC, pointed at the
    site's pages: a REPO_PAGES file (`../../cluster/README.md#...` from docs/guide/) at
    its copy under repo/, and, from such a copy, a file in docs/ at its page."""
    here = posixpath.dirname(page_src)
    # where the page's own file lies in the repository
    repo_dir = (posixpath.dirname(page_src[len(REPO_PREFIX):])
                if page_src.startswith(REPO_PREFIX) else posixpath.join("docs", here))

    def one(m: re.Match) -> str:
        target = posixpath.normpath(posixpath.join(repo_dir, m.group(1)))
        if target in REPO_PAGES:
            site = REPO_PREFIX + target
        elif target.startswith("docs/") and page_src.startswith(REPO_PREFIX):
            site = target[len("docs/"):]
        else:
            return m.group(0)
        return f"]({posixpath.relpath(site, here or '.')}{m.group(2) or ''})"

    return LINK.sub(one, markdown)


# --- the mkdocs events ------------------------------------------------------------------

def on_files(files, config):
    from mkdocs.structure.files import File, InclusionLevel

    for rel in REPO_PAGES:  # pages of the site, reached by links, not in the nav
        files.append(File.generated(config, REPO_PREFIX + rel, abs_src_path=str(ROOT / rel),
                                    inclusion=InclusionLevel.NOT_IN_NAV))
    return files


def on_page_markdown(markdown, page, config, files):
    if page.file.src_uri.startswith(REPO_PREFIX):  # a repository file: no markers
        return repo_links(markdown, page.file.src_uri)
    return repo_links(expand(markdown), page.file.src_uri)
