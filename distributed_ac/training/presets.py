"""The preset a new run starts from, found by what its env is: the file shipped for its id,
for the `spec.id` (or PettingZoo name) of what an entry point makes, for its suite, or
for its kind (told by its observation space); else the default preset. `dac train` and
the Python API both start a run here."""

from __future__ import annotations

from pathlib import Path

from distributed_ac.config import presets


def preset_for(env: str, gym_packages: tuple[str, ...] = ()) -> tuple[Path | None, str]:
    """(the preset's path, the env name it was found by: `env` itself, or for a
    `module:attr` entry point the name of the env it makes)."""
    if ":" not in env:
        found = presets.match(env)
    else:
        from distributed_ac.envs.vector import made_names  # one copy, kept for kind_of

        found = presets.match(env, *made_names(env, tuple(gym_packages)))
    path, name = found
    if path is not None and path.stem == presets.DEFAULT:
        kind = kind_of(env, tuple(gym_packages))
        if kind and (presets.DIR / f"{kind}.yaml").is_file():
            return presets.DIR / f"{kind}.yaml", name
    return found


def kind_of(env: str, gym_packages: tuple[str, ...] = ()) -> str | None:
    """The KINDS entry a Gymnasium env's observation space puts it in (a bare Discrete:
    tabular), from the one copy envs.vector.made_once makes; None for other envs,
    PettingZoo's, or one that cannot be made."""
    from gymnasium.spaces import Discrete

    from distributed_ac.envs.vector import made_once

    space = made_once(env, tuple(gym_packages))[1]
    return "tabular" if isinstance(space, Discrete) else None


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
    elif preset.stem in presets.KINDS:
        what = (f"{env} has no preset of its own: settings for "
                f"{presets.KINDS[preset.stem]} from {where}")
    elif suite and preset.stem == presets.SUITES[suite]:
        what = f"{env} has no preset of its own: settings for its suite ({suite}*) from {where}"
    else:
        what = f"{env} has no preset of its own: settings from {where}, the defaults for such envs"
    return f"dac: {what} (--config and flags override them; --no-preset for the package base)"
