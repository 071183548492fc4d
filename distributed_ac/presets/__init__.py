"""Tuned settings per environment, shipped with the package (as rl-zoo ships its
hyperparameter files).

`dac train --env ID` starts from `presets/ID.yaml` when there is one ('/' in an id
becomes '_'), says so in one line, and then applies --config and the flags on top, so
anything set explicitly wins; `--no-preset` starts from the package defaults instead.
Each file says what it was tuned with and what it reached (benchmarks/RESULTS.md).
"""

from __future__ import annotations

from pathlib import Path

DIR = Path(__file__).parent


def path_for(env: str) -> Path | None:
    """The preset file for an env id, or None when none is shipped."""
    p = DIR / f"{env.replace('/', '_')}.yaml"
    return p if p.is_file() else None


def available() -> list[str]:
    return sorted(p.stem for p in DIR.glob("*.yaml"))
