"""Command-line helpers shared by `dac` and `dac bench`: tyro with one-line errors, and
output paths checked before any work is done."""

from __future__ import annotations

import contextlib
import io
from pathlib import Path

import tyro

from distributed_ac.core.errors import UsageError
from distributed_ac.run.rundir import unwritable_ancestor


def flag_value(argv: list[str], flag: str) -> str | None:
    """The value of `flag` in argv (`--flag VALUE` or `--flag=VALUE`), read before tyro
    parses the rest (a config file's fields are the defaults the flags override)."""
    for i, a in enumerate(argv):
        if a == flag:
            if i + 1 >= len(argv):
                raise UsageError(f"{flag} needs a value")
            return argv[i + 1]
        if a.startswith(flag + "="):
            return a.split("=", 1)[1]
    return None


def flag_values(argv: list[str], flag: str) -> tuple[str, ...]:
    """The values of a flag that takes several (`--flag A B`, up to the next flag), or
    `--flag=A`; () when it is not given."""
    for i, a in enumerate(argv):
        if a.startswith(flag + "="):
            return (a.split("=", 1)[1],)
        if a == flag:
            rest = argv[i + 1:]
            end = next((j for j, b in enumerate(rest) if b.startswith("--")), len(rest))
            return tuple(rest[:end])
    return ()


def parse_flags(cls, argv: list[str], **kwargs):
    """tyro.cli, with tyro's error box turned into one UsageError line; --help still prints."""
    if "-h" in argv or "--help" in argv:
        return tyro.cli(cls, args=argv, **kwargs)
    captured = io.StringIO()
    try:
        with contextlib.redirect_stderr(captured), contextlib.redirect_stdout(captured):
            return tyro.cli(cls, args=argv, **kwargs)
    except SystemExit:
        raise UsageError(_box_to_line(captured.getvalue())) from None


def check_writable(path: Path, flag: str) -> None:
    """Refuse an output path no file can be written at, before any work is done: its
    nearest existing ancestor must be a directory this user may write in (the missing
    ones in between are created when the output is written)."""
    blocked = unwritable_ancestor(path.absolute().parent)
    if blocked:
        raise UsageError(f"{flag} {path}: cannot write in {blocked}")


def _box_to_line(text: str) -> str:
    """tyro's message (the text between its first two rules, box or plain), on one line."""
    body, rules = [], 0
    for raw in text.splitlines():
        inner = raw.strip().strip("│╭╮╰╯|").strip()
        if inner and set(inner) <= set("─-━ "):
            rules += 1
            if rules == 2:
                break
        elif inner and not inner.startswith("╭"):
            body.append(inner)
    return (" ".join(body) or "invalid command-line arguments") + " (see --help)"
