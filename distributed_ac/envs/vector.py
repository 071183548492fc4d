"""Vector environments: one place that knows how Gymnasium envs are made and checked.

`make_vector_env` returns a Gymnasium 1.x VectorEnv in NEXT_STEP autoreset mode (the
step after an episode ends is a reset step whose action is ignored; acting/worker.py masks
it). The spaces it has are described by envs/space.py's `EnvSpace` (`space_for`,
`probe_space`).

Observations: a Box that structured.image_shape reads as an image (rank 3 as (H, W, C),
a rank-2 uint8 or bool frame as one channel) keeps its dtype when it is uint8 (Atari
frames: 84 x 84 x 4) all the way to the learner's graph, which scales it by 1/255; any
other Box is flattened to float32 [obs_dim] for an MLP. Dict, Tuple, Discrete,
MultiDiscrete, MultiBinary and Text observations are read as structured.py says.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import importlib
import os

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode

from distributed_ac.core.errors import BadInput, ConfigError, EnvError
from distributed_ac.envs import atari, multiagent, reading, selfplay, subproc
from distributed_ac.envs.packages import import_packages, unknown_id_hint
from distributed_ac.envs.space import EnvSpace, space_of


def resolve_env_id(env: str) -> str:
    """Return a registered Gymnasium id for `env`; a `module:attr` entry point is imported
    and registered under its own name so make_vec treats it like any other id."""
    if ":" not in env:
        atari.register_ale(env)
        if env not in gym.registry:
            raise EnvError(f"unknown environment id '{env}': not in the Gymnasium registry "
                           "(check the spelling, or give a module:Class entry point; "
                           f"{unknown_id_hint(env)})")
        return env
    module_name, _, attr = env.partition(":")
    _entry_point(env)
    env_id = f"dac-{module_name}.{attr}-v0"
    if env_id not in gym.registry:
        gym.register(id=env_id, entry_point=env)
    return env_id


def _entry_point(env: str):
    """The callable a `module:attr` entry point names (its module imported)."""
    module_name, _, attr = env.partition(":")
    try:
        module = importlib.import_module(module_name)
    except Exception as e:  # any import-time failure of user code is reported as one line
        raise EnvError(f"cannot import entry point module '{module_name}': {type(e).__name__}: {e}") from None
    factory = getattr(module, attr, None)
    if not callable(factory):
        raise EnvError(f"entry point '{env}': module '{module_name}' has no callable '{attr}'")
    return factory


@functools.lru_cache(maxsize=8)
def made_once(env: str, gym_packages: tuple[str, ...] = ()) -> tuple[tuple[str, ...], object]:
    """One copy of `env` (an id, or a `module:attr` entry point called as a run calls it),
    made and closed: (the name it calls itself, the `spec.id` of a Gymnasium env or a
    PettingZoo env's `metadata["name"]`, as a 0- or 1-tuple; its `observation_space`
    attribute, None where it has none). ((), None) when making it fails: the run's own
    checks report that in one line."""
    try:
        import_packages(gym_packages)
        made_env = _entry_point(env)() if ":" in env else gym.make(env)
    except Exception:  # the same failure is reported, in one line, when the run makes it
        return (), None
    try:
        spec = getattr(made_env, "spec", None)
        name = spec.id if spec is not None else getattr(made_env, "metadata", {}).get("name")
        names = (name,) if isinstance(name, str) and name else ()
        return names, getattr(made_env, "observation_space", None)
    finally:
        with contextlib.suppress(Exception):
            made_env.close()


def made_names(env: str, gym_packages: tuple[str, ...] = ()) -> tuple[str, ...]:
    """What a `module:attr` entry point's env calls itself (made_once's names); () for a
    plain id, or when making it fails."""
    return made_once(env, tuple(gym_packages))[0] if ":" in env else ()


def parallel_maker_of(env: str):
    """For a `module:attr` entry point that makes PettingZoo envs, a callable making one
    ParallelEnv (envs/multiagent.py); None for every other env."""
    if ":" not in env:
        return None
    factory = _entry_point(env)
    return made(env, lambda: multiagent.parallel_maker(env, factory))


def make_parallel_vector_env(env: str, num_envs: int, agent_id: bool = True,
                             vectorization: str = "auto", preprocess: atari.Preprocess | None = None,
                             self_play: bool = False, critic_input: str = "own", **make_kwargs):
    """`num_envs` copies of a PettingZoo entry point's env as one checked vector env of
    num_envs x agents rows (each copy made with `make_kwargs`), or with `self_play` of
    num_envs games, the policy in one seat (envs/selfplay.py); None when `env` makes
    Gymnasium envs. The copies are stepped in this process, without preprocessing."""
    if self_play:
        return _self_play_env(env, num_envs, vectorization, **make_kwargs)
    maker = parallel_maker_of(env)
    if maker is None:
        return None
    if vectorization not in ("auto", "sync"):
        raise EnvError(f"'{env}' is a PettingZoo env, whose copies are stepped in their "
                       f"worker's process: vectorization auto or sync, not {vectorization}")
    p = preprocess or atari.Preprocess()
    if p.wanted or p.sticky_actions is not None or p.info_mask:
        raise EnvError(f"'{env}' is a PettingZoo env: frame_size, grayscale, frame_stack, "
                       "sticky_actions and info_action_mask apply to Gymnasium envs only")
    return _checked(made(env, lambda: multiagent.ParallelVectorEnv(
        lambda: maker(**make_kwargs), num_envs, agent_id, env, critic_input)), env)


def _self_play_env(env: str, num_envs: int, vectorization: str, **make_kwargs):
    """num_envs copies of a two-player AEC game as a SelfPlayVectorEnv."""
    if ":" not in env or vectorization not in ("auto", "sync"):
        raise EnvError(f"self_play takes a PettingZoo AEC game as a module:function entry "
                       f"point (e.g. pettingzoo.classic.connect_four_v3:env), stepped in its "
                       f"worker's process (vectorization auto or sync); not '{env}'")
    factory = _entry_point(env)

    def make():
        game = factory(**make_kwargs)
        if not multiagent.is_aec(game):
            raise EnvError(f"self_play: '{env}' made a {type(game).__name__}, not a "
                           "PettingZoo AECEnv (a two-player game whose players take turns)")
        return game

    return _checked(made(env, lambda: selfplay.SelfPlayVectorEnv(make, num_envs, env)), env)


class _NameSubEnvErrors(gym.Wrapper):
    """Re-raise a sub-env's exception with its index, so a failure can be located."""

    def __init__(self, env: gym.Env, index: int):
        super().__init__(env)
        self.index = index

    def step(self, action):
        try:
            return self.env.step(action)
        except Exception as e:
            e.sub_env_index = self.index  # read by sub_env_of(); the exception stays itself
            raise


def sub_env_of(error: BaseException) -> str:
    """'sub-env i' when the failing sub-env is known (sync vectorization), else why not."""
    index = getattr(error, "sub_env_index", None)
    return f"sub-env {index}" if index is not None else "sub-env unknown (not sync-vectorized)"


def _index_wrapper():
    """A make_vec wrapper that numbers sub-envs in the order SyncVectorEnv creates them."""
    counter = iter(range(1 << 30))
    return lambda env: _NameSubEnvErrors(env, next(counter))


def _vector_mode(vectorization: str, spec: gym.envs.registration.EnvSpec) -> str:
    if vectorization == "auto":
        return "vector_entry_point" if spec.vector_entry_point else "sync"
    if vectorization == "vector_entry_point" and not spec.vector_entry_point:
        raise EnvError(f"'{spec.id}' has no vector_entry_point; use vectorization sync or async")
    return vectorization


def make_vector_env(env: str, num_envs: int, vectorization: str = "auto",
                    preprocess: atari.Preprocess | None = None,
                    agent_id: bool = True, self_play: bool = False,
                    critic_input: str = "own") -> gym.vector.VectorEnv:
    """A checked VectorEnv of `num_envs` sub-envs in NEXT_STEP autoreset mode, each
    preprocessed as atari.py says (ALE ids always; other envs as `preprocess` asks); a
    PettingZoo env's copies as num_envs x agents rows (make_parallel_vector_env), with
    `critic_input` state or joint also the critic's rows (envs/central.py)."""
    parallel = make_parallel_vector_env(env, num_envs, agent_id, vectorization, preprocess,
                                        self_play, critic_input)
    if parallel is not None:
        return parallel
    if critic_input != "own":
        raise EnvError(f"critic_input {critic_input} is for PettingZoo envs of several "
                       f"agents; '{env}' is a Gymnasium env (use critic_input own)")
    env_id = resolve_env_id(env)
    preprocess = preprocess or atari.Preprocess()
    if atari.is_ale(env_id) and vectorization in ("auto", "vector_entry_point"):
        # ale_py's C++ vector env: 1.6x the agent steps per CPU second of the same
        # preprocessing in Gymnasium's wrappers (benchmarks/atari_env.py, docs/guide/images-atari.md)
        return _checked(made(env, lambda: atari.make_ale_vector(env_id, num_envs, preprocess)), env)
    make_kwargs, extra = _preprocessing(env_id, preprocess)
    mode = "sync" if extra and vectorization == "auto" else _vector_mode(vectorization, gym.spec(env_id))
    if extra and mode == "vector_entry_point":
        raise EnvError(f"'{env}' with image preprocessing needs vectorization sync or async")
    vector_kwargs: dict = {}
    if mode in ("sync", "async"):
        vector_kwargs["autoreset_mode"] = AutoresetMode.NEXT_STEP
    if mode == "async":
        # fork after TensorFlow or Ray threads exist can deadlock; spawn is always safe.
        vector_kwargs["context"] = "spawn"
        vector_kwargs["worker"] = functools.partial(subproc.env_worker, os.getpid())
    wrappers = [*extra, _index_wrapper()] if mode == "sync" else extra or None
    return _checked(made(env, lambda: gym.make_vec(
        env_id, num_envs=num_envs, vectorization_mode=mode, vector_kwargs=vector_kwargs,
        wrappers=wrappers, **make_kwargs)), env)


def reset_seeds(venv: gym.vector.VectorEnv, seeds: list[int]):
    """What `venv.reset(seed=...)` takes to seed sub-env i with seeds[i]: a list for
    Gymnasium's Sync/AsyncVectorEnv, an array for ale_py's AtariVectorEnv. An env's own
    vector class (CartPole's) takes one seed for all its sub-envs: seeds[0]."""
    inner = venv.unwrapped
    if isinstance(inner, multiagent.ParallelVectorEnv):  # one seed a copy, not a row
        return list(seeds[::inner.num_agents])
    if isinstance(inner, (gym.vector.SyncVectorEnv, gym.vector.AsyncVectorEnv)):
        return list(seeds)
    if type(inner).__name__ == "AtariVectorEnv":  # ale_py's, imported only when used
        return np.asarray(seeds, np.int64)
    return seeds[0]


def made(env: str, make):
    """make(), with any failure but bad input reported as one line naming the env."""
    try:
        return make()
    except BadInput:
        raise
    except Exception as e:
        raise EnvError(f"cannot make environment '{env}': {type(e).__name__}: {e}") from None


def _checked(venv: gym.vector.VectorEnv, env: str) -> gym.vector.VectorEnv:
    autoreset = venv.metadata.get("autoreset_mode", AutoresetMode.NEXT_STEP)
    if autoreset != AutoresetMode.NEXT_STEP:
        venv.close()
        raise EnvError(f"'{env}' resets in {autoreset} mode; only NEXT_STEP autoreset is supported")
    space_of(venv, env, text_obs="hash")  # readable at all; the Config says how (space_for)
    return venv


def _preprocessing(env_id: str, p: atari.Preprocess) -> tuple[dict, list]:
    """(make kwargs, wrappers innermost first) of atari.py's preprocessing for this env."""
    if atari.is_ale(env_id):
        return atari.ale_make_kwargs(p), atari.ale_wrappers(p)
    if p.sticky_actions is not None:
        raise EnvError(f"sticky_actions applies to ALE ids only, not '{env_id}'")
    return {}, atari.image_wrappers(p)


def vector_env_for(cfg, num_envs: int) -> gym.vector.VectorEnv:
    """make_vector_env for a Config: its env, vectorization and preprocessing (after
    importing its gym_packages, in whichever process this runs)."""
    import_packages(cfg.gym_packages)
    return make_vector_env(cfg.env, num_envs, cfg.vectorization, atari.Preprocess.of(cfg),
                           cfg.agent_id, cfg.self_play, cfg.critic_input)


def resolved(cfg):
    """(cfg with frame_size and categorical_obs auto settled, the start-up lines that say
    how its image is read): envs/reading.py's decisions, made from one raw copy of the env
    and its first observations. PettingZoo and ALE envs, and a Config with both settled
    already, are returned as they are, without making an env."""
    settled = cfg.frame_size != 0 and cfg.categorical_obs is not None
    if settled or cfg.self_play or atari.is_ale(cfg.env) or parallel_maker_of(cfg.env):
        return cfg, reading_lines(cfg) if settled else []
    probe = _probe_image(cfg)
    if probe is None:
        return dataclasses.replace(cfg, frame_size=cfg.frame_size or reading.KEEP,
                                   categorical_obs=bool(cfg.categorical_obs)), []
    categorical = (reading.is_category_grid(probe) if cfg.categorical_obs is None
                   else cfg.categorical_obs)
    if categorical and not probe.dtype.startswith(("uint", "int")):
        raise ConfigError(f"categorical_obs reads integer grids; '{cfg.env}' gives "
                          f"{probe.dtype} images")
    cfg = dataclasses.replace(cfg, frame_size=reading.frame_size_for(probe, cfg.frame_size),
                              categorical_obs=categorical)
    return cfg, _describe(cfg, probe)


def reading_lines(cfg) -> list[str]:
    """The start-up lines for how a resumed run's Config reads its image (a run from
    before the reading was settled, frame_size 0 and categorical_obs null, reads it as
    it always did: frames at the env's size, pixels)."""
    if cfg.self_play or atari.is_ale(cfg.env) or parallel_maker_of(cfg.env):
        return []
    probe = _probe_image(cfg)
    return [] if probe is None else _describe(cfg, probe)


def category_grid(cfg) -> tuple | None:
    """(Dict key or None, [H, W, C]) of the grid a run reads as categories, as the raw env
    gives it (what an export takes); None when it reads none."""
    probe = _probe_image(cfg) if cfg.categorical_obs else None
    return None if probe is None else (probe.key, probe.shape)


def _describe(cfg, probe: reading.Probe) -> list[str]:
    return reading.describe(probe, cfg.frame_size, cfg.categorical_obs,
                            cfg.normalize_obs is not False, probe.space)


def _probe_image(cfg) -> reading.Probe | None:
    """reading.probe of one raw copy of the env (no preprocessing), seeded with cfg.seed."""
    import_packages(cfg.gym_packages)
    raw = atari.Preprocess(frame_size=reading.KEEP)
    vectorization = "sync" if cfg.vectorization == "async" else cfg.vectorization
    venv = make_vector_env(cfg.env, 1, vectorization, raw)
    try:
        return reading.probe(venv, cfg.seed)
    finally:
        venv.close()


def space_for(cfg) -> EnvSpace:
    """The spaces of a Config's env as its workers make it (preprocessing included)."""
    import_packages(cfg.gym_packages)
    return probe_space(cfg.env, cfg.vectorization, atari.Preprocess.of(cfg),
                       not cfg.ignore_action_mask, cfg.observe_action_mask, cfg.text_obs,
                       cfg.agent_id, cfg.self_play, cfg.critic_input)


def configured_space(venv: gym.vector.VectorEnv, cfg) -> EnvSpace:
    """space_of with a Config's action-mask settings."""
    return space_of(venv, cfg.env, not cfg.ignore_action_mask, cfg.observe_action_mask,
                    cfg.text_obs)


def probe_space(env: str, vectorization: str = "auto",
                preprocess: atari.Preprocess | None = None, use_mask: bool = True,
                observe_mask: bool = False, text_obs: str = "drop",
                agent_id: bool = True, self_play: bool = False,
                critic_input: str = "own") -> EnvSpace:
    """Make a one-env vector env just long enough to read its spaces (space_of); an
    async one is probed sync (no subprocess for one look), except a PettingZoo env's,
    which refuses async as its workers would."""
    if vectorization == "async" and not self_play and parallel_maker_of(env) is None:
        vectorization = "sync"
    venv = make_vector_env(env, 1, vectorization, preprocess, agent_id, self_play, critic_input)
    try:
        return space_of(venv, env, use_mask, observe_mask, text_obs)
    finally:
        venv.close()
