"""Tuned settings per environment, shipped with the package (as rl-zoo ships its
hyperparameter files).

`dac train --env ID` starts from `presets/ID.yaml` when there is one ('/' and ':' in an
id or a `module:function` entry point become '_'). A preset is found by what the env
is, not only by how it was named: an entry point's made env is also looked up by its
`spec.id` (Gymnasium) or `metadata["name"]` (PettingZoo), so `mymod:make` returning
`gym.make("CartPole-v1")` gets CartPole's preset, and one returning a popgym env gets
popgym's. An env
without a file of its own starts from its suite's file when one of its names has a
suite's prefix (SUITES: an `ALE/` id from `presets/atari.yaml`, cleanRL's Atari PPO; a
`popgym-` id from `presets/popgym.yaml`, with a recurrent core), else from its kind's
file when its observation space makes it one of KINDS (a bare Discrete observation, as
FrozenLake's and CliffWalking's: `presets/tabular.yaml`), else from
`presets/default.yaml`: the settings that measured
most robust across the suite of envs (docs/notes/defaults-without-a-preset.md). Either
way `dac train` says so in one line and then applies --config and the flags on top, so
anything set explicitly wins; `--no-preset` starts from the package base
(config/schema.py's Config field defaults) instead.
Each file says what it was tuned with and what it reached.
"""

from __future__ import annotations

from pathlib import Path

DIR = Path(__file__).parent
DEFAULT = "default"  # the stem of the file for envs without one of their own
# ... and for a suite's ids without one
SUITES = {"ALE/": "atari", "popgym-": "popgym"}
# ... and for an env of a kind, told by its observation space, without one of its own or
# its suite's: the file's stem, and what the start-up line calls such envs
KINDS = {"tabular": "envs whose observation is one state index (a bare Discrete)"}
FALLBACKS = (DEFAULT, *SUITES.values(), *KINDS)


def path_for(env: str) -> Path | None:
    """The preset file shipped for an env id, or None when none is."""
    p = DIR / f"{stem_of(env)}.yaml"
    return p if p.is_file() and p.stem not in FALLBACKS else None


def stem_of(env: str) -> str:
    """The file stem an env id's or entry point's preset has: '/' and ':' become '_'."""
    return env.replace("/", "_").replace(":", "_")


def suite_of(env: str) -> str | None:
    """The id prefix of the suite `env` belongs to (SUITES), or None."""
    return next((prefix for prefix in SUITES if env.startswith(prefix)), None)


def for_env(env: str, *aliases: str) -> Path | None:
    """What a new run of `env` starts from: its own preset, else its suite's, else the
    default one (None if that is missing too); `aliases`: the names the made env gives
    itself (spec.id, PettingZoo's metadata name), looked up after `env`."""
    return match(env, *aliases)[0]


def match(*names: str) -> tuple[Path | None, str]:
    """(the preset for the first of `names` with one of its own, else for the first in a
    suite, else the default one; the name it was found by, names[0] for the default)."""
    for name in names:
        if path_for(name):
            return path_for(name), name
    name = next((n for n in names if suite_of(n)), names[0])
    suite = suite_of(name)
    for stem in ((SUITES[suite],) if suite else ()) + (DEFAULT,):
        if (DIR / f"{stem}.yaml").is_file():
            return DIR / f"{stem}.yaml", name
    return None, name


def available() -> list[str]:
    """The env ids' file stems with a preset of their own."""
    return sorted(p.stem for p in DIR.glob("*.yaml") if p.stem not in FALLBACKS)
