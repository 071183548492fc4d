"""Distributed advantage actor-critic on Ray and TensorFlow.

Importing this package is cheap: it pulls in neither TensorFlow nor Ray, so rollout
workers stay light. The Python API (distributed_ac.api) is reachable from here:

    import distributed_ac as dac
    result = dac.train(env="CartPole-v1", total_env_steps=200_000, seed=0)
    policy = dac.load(result.run_dir)

Its functions import TensorFlow and Ray only when called.
"""

__version__ = "0.2.0"

__all__ = ["train", "load", "evaluate", "export", "TrainResult", "LoadedPolicy"]


def __getattr__(name: str):
    """The API's names, imported from distributed_ac.api on first use."""
    if name in __all__:
        from distributed_ac import api

        return getattr(api, name)
    raise AttributeError(f"module 'distributed_ac' has no attribute {name!r}")
