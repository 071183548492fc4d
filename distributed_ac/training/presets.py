"""The preset a new run starts from, found by what its env is: the file shipped for its id,
for the `spec.id` (or PettingZoo name) of what an entry point makes, or for its suite; else
the default preset. `dac train` and the Python API both start a run here."""

from __future__ import annotations

from pathlib import Path

from distributed_ac.config import presets


def preset_for(env: str, gym_packages: tuple[str, ...] = ()) -> tuple[Path | None, str]:
    """(the preset's path, the env name it was found by: `env` itself, or for a
    `module:attr` entry point the name of the env it makes)."""
    if ":" not in env:
        return presets.match(env)
    from distributed_ac.envs.vector import made_names  # makes one copy: Gymnasium's import

    return presets.match(env, *made_names(env, tuple(gym_packages)))


def preset_note(preset: Path | None, name: str, env: str) -> str | None:
    """The start-up line that names the preset a new run started from (None: none)."""
    if preset is None:
        return None
    where = preset.relative_to(presets.DIR.parents[2])  # distributed_ac/config/presets/...
    if name != env:
        env = f"{name} (what {env} makes)"
    suite = presets.suite_of(name)
    if preset.stem not in presets.FALLBACKS:
        what = f"tuned settings for {env} from {where}"
    elif suite and preset.stem == presets.SUITES[suite]:
        what = f"{env} has no preset of its own: settings for its suite ({suite}*) from {where}"
    else:
        what = f"{env} has no preset of its own: settings from {where}, the defaults for such envs"
    return f"dac: {what} (--config and flags override them; --no-preset for the package base)"
