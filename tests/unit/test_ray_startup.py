"""The local Ray's start-up under load (pool/ray_cluster.init_local): Ray's own start-up
timeout is tried again once, and a second one is one line naming the cause and --serial.
A stand-in for the ray module isolates the retry: the real timeout needs a machine loaded
past Ray's fixed 30 s."""

import pytest

from distributed_ac.core.errors import ClusterError
from distributed_ac.pool import ray_cluster

TIMEOUT = ("The current node timed out during startup. This could happen because some of "
           "the raylet failed to startup or the GCS has become overloaded.")


class Ray:
    """ray.init that raises `failures` in turn, then starts; counts the shutdowns."""

    def __init__(self, *failures):
        self.failures, self.inits, self.shutdowns = list(failures), [], 0

    def init(self, **kwargs):
        self.inits.append(kwargs)
        if self.failures:
            raise self.failures.pop(0)

    def shutdown(self):
        self.shutdowns += 1


def test_a_start_up_timeout_is_tried_again_once_with_the_same_arguments():
    ray = Ray(Exception(TIMEOUT))
    ray_cluster.init_local(ray, address="local", num_cpus=2)
    assert ray.inits == [{"address": "local", "num_cpus": 2}] * 2 and ray.shutdowns == 1


def test_a_second_timeout_is_one_line_naming_the_cause_and_serial():
    ray = Ray(Exception(TIMEOUT), Exception(TIMEOUT))
    with pytest.raises(ClusterError) as e:
        ray_cluster.init_local(ray, address="local")
    assert len(ray.inits) == 2 and "\n" not in str(e.value)
    assert "did not start" in str(e.value) and "--serial" in str(e.value)


def test_any_other_failure_is_not_retried():
    ray = Ray(ValueError("num_cpus must be positive"))
    with pytest.raises(ValueError):
        ray_cluster.init_local(ray, address="local")
    assert len(ray.inits) == 1
