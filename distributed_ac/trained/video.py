"""`dac evaluate --video DIR`: the evaluation episodes as MP4 files in DIR.

A Gymnasium env is recorded by Gymnasium's RecordVideo. A PettingZoo env (one copy of a
Parallel env, or of a self-play game) is played by acting/evaluation.py's own loops,
which look at the env's class, so no wrapper can stand in front of it: the loops hand
every reset and step to an EpisodeRecorder instead, which renders the copy and writes
each episode with Gymnasium's save_video. It keeps RecordVideo's schedule (episodes 0,
1, 8, 27, 64, ...), names (eval-episode-I.mp4), frames (the reset's, then one after
each step) and frame rate (the env's render_fps, else 30), so both kinds of env give
the same files. Rendering only reads the env, so the episodes played are those
played without --video.
"""

from __future__ import annotations

from pathlib import Path

import gymnasium as gym

from distributed_ac.acting.evaluation import make_eval_env
from distributed_ac.config.schema import Config
from distributed_ac.core.errors import BadInput, MissingDependency, UsageError
from distributed_ac.envs.multiagent import ParallelVectorEnv
from distributed_ac.envs.selfplay import SelfPlayVectorEnv

PREFIX = "eval"


def recording_env(cfg: Config, folder: Path) -> tuple[gym.Env, EpisodeRecorder | None]:
    """The evaluation env made to render rgb_array frames, and for a PettingZoo env the
    recorder its episodes are played with (None: the env is a RecordVideo). An env that
    renders no such frames, or moviepy missing, is refused in one line."""
    env = make_eval_env(cfg, render_mode="rgb_array")
    try:
        _check_frames(env, cfg.env)
        try:
            import moviepy  # noqa: F401  RecordVideo's and save_video's encoder; an optional extra
        except ImportError:
            raise MissingDependency("--video needs moviepy: pip install "
                                    "'distributed_ac[video]'") from None
    except BadInput:
        env.close()
        raise
    if isinstance(env, (ParallelVectorEnv, SelfPlayVectorEnv)):
        return env, EpisodeRecorder(env, folder)
    return gym.wrappers.RecordVideo(env, str(folder), name_prefix=PREFIX,
                                   disable_logger=True), None


def _check_frames(env: gym.Env, name: str) -> None:
    modes = env.metadata.get("render_modes", [])
    # Gymnasium's make drops a render mode its env does not list; a PettingZoo env keeps
    # whatever it was handed, so only its metadata tells whether it can draw a frame.
    pettingzoo = isinstance(env, (ParallelVectorEnv, SelfPlayVectorEnv))
    if env.render_mode != "rgb_array" or (pettingzoo and "rgb_array" not in modes):
        raise UsageError(f"--video: '{name}' does not render rgb_array frames "
                         f"(its render modes: {modes})")


class EpisodeRecorder:
    """Called by the evaluation loops after each reset (over False) and step (over True
    once the episode has ended) with the episode's index; writes the episodes that
    RecordVideo's schedule picks, each when it ends."""

    def __init__(self, env: gym.vector.VectorEnv, folder: Path):
        self.env, self.folder = env, folder
        self.fps = env.metadata.get("render_fps", 30)
        self.frames: list = []

    def __call__(self, episode: int, over: bool) -> None:
        from gymnasium.utils.save_video import capped_cubic_video_schedule, save_video

        if not capped_cubic_video_schedule(episode):
            return  # not rendered at all: a frame costs far more than a step
        self.frames.append(self.env.render())
        if over:
            save_video(self.frames, str(self.folder), name_prefix=PREFIX,
                       episode_index=episode, fps=self.fps)
            self.frames = []
