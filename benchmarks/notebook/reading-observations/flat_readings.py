"""MiniGrid-Unlock-v0 read flat, as entry points for the reading experiment of
docs/notes/reading-observations.md (the CNN-or-MLP question):

    PYTHONPATH=benchmarks/notebook/reading-observations dac train --env flat_readings:flat --serial --seed 0 \
        --total-env-steps 150000 --rollout-length 128 --actor-lr 2.5e-4 --critic-lr 2.5e-4 \
        --actor-lr-decay-rate 1 --critic-lr-decay-rate 1

flat: the image's 147 raw codes as one vector (rl-zoo's FlatObsWrapper, without the
mission); onehot: MiniGrid's own one-hot partial view (980 values) as one vector.
"""

import gymnasium as gym
import minigrid  # noqa: F401  (registers the MiniGrid ids)
from minigrid.wrappers import ImgObsWrapper, OneHotPartialObsWrapper


def flat(**kwargs):
    return gym.wrappers.FlattenObservation(ImgObsWrapper(gym.make("MiniGrid-Unlock-v0", **kwargs)))


def onehot(**kwargs):
    env = ImgObsWrapper(OneHotPartialObsWrapper(gym.make("MiniGrid-Unlock-v0", **kwargs)))
    return gym.wrappers.FlattenObservation(env)
