"""Packages that register their env ids on import (Config.gym_packages, `--gym-packages`).

MiniGrid, Shimmy (dm_control), popgym and MinAtar add their ids to Gymnasium's registry
only when imported (MinAtar only when its `register_envs` is called), and the registry is
per process: every process that makes or probes an env (the driver, each Ray rollout
worker on whatever node, the evaluator, `dac evaluate`, a `dac tune` trial) has to import
them itself. envs/vector.py and acting/evaluation.py call import_packages where a
Config's env is made, so no command can forget it.

No TensorFlow or Ray here: rollout workers import this module.
"""

from __future__ import annotations

import importlib

from distributed_ac.core.errors import EnvError

# top-level module -> the project's extra that installs it (pyproject.toml)
EXTRAS = {"minigrid": "minigrid", "minatar": "minatar", "shimmy": "dmc", "dm_control": "dmc",
          "popgym": "popgym", "vizdoom": "vizdoom"}
# (id prefix, who registers it, the gym_packages entry that does)
PREFIXES = (("MiniGrid-", "MiniGrid", "minigrid"), ("BabyAI-", "MiniGrid", "minigrid"),
            ("MinAtar/", "MinAtar", "minatar.gym:register_envs"),
            ("dm_control/", "dm_control", "shimmy"), ("popgym-", "popgym", "popgym"),
            ("Vizdoom", "VizDoom", "vizdoom.gymnasium_wrapper"))

# names imported (and their functions called) in this process: each once, as the flag
# reaches several call sites (probe, vector env, evaluator) and a registering function
# may not tolerate a second call (gym.register warns of each id it overrides)
_imported: set[str] = set()


def import_packages(names: tuple[str, ...] | list[str] | str) -> None:
    """Import each `module` (and for `module:function` call `function()`), once per
    process per name; any failure is one EnvError line naming the package."""
    for name in (names,) if isinstance(names, str) else names:  # a lone YAML string
        if name not in _imported:
            _import_one(name)
            _imported.add(name)


def _import_one(name: str) -> None:
    module_name, _, function = name.strip().partition(":")
    if not module_name or (":" in name and not function):
        raise EnvError(f"gym package '{name}': expected MODULE or MODULE:FUNCTION")
    try:
        module = importlib.import_module(module_name)
    except Exception as e:  # any import-time failure of a package is reported as one line
        hint = f" ({install_hint(module_name)})" if isinstance(e, ImportError) else ""
        raise EnvError(f"cannot import gym package '{module_name}': {_why(e)}{hint}") from None
    if not function:
        return
    register = getattr(module, function, None)
    if not callable(register):
        raise EnvError(f"gym package '{name}': module '{module_name}' has no callable "
                       f"'{function}'")
    try:
        register()
    except Exception as e:  # as an import: the package's own failure, one line
        raise EnvError(f"gym package '{name}': {function}() raised {_why(e)}") from None


def install_hint(module_name: str) -> str:
    """How to install the package a module belongs to: the project's extra if it has one."""
    extra = EXTRAS.get(module_name.split(".")[0])
    if extra is None:
        return "pip install it, or put it on PYTHONPATH, on every node that makes the env"
    return f'pip install it, or the project\'s extra: pip install -e ".[{extra}]"'


def unknown_id_hint(env_id: str) -> str:
    """What resolve_env_id's 'unknown environment id' line adds: the --gym-packages entry
    that registers an id of a known suite, else how to name a package that does."""
    for prefix, suite, entry in PREFIXES:
        if env_id.startswith(prefix):
            if entry in _imported:  # imported already: the id itself is wrong
                return f"--gym-packages {entry} registers no such {suite} id"
            return f"{suite}'s ids are registered by --gym-packages {entry}"
    return "if a package registers it, name it with --gym-packages PKG"


def _why(e: BaseException) -> str:
    """`Type: message` on one line (a package's message may span several)."""
    return f"{type(e).__name__}: {' '.join(str(e).split())}"
