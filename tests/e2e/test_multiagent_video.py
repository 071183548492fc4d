"""`dac evaluate --video` on PettingZoo envs, on tiny serial runs (no Ray): a Parallel env
(MPE's simple_spread) and a self-play game (tic-tac-toe) are recorded as a Gymnasium env
is, one MP4 per scheduled episode with the reset's frame and one a step, and recording
leaves the episodes as they are; an env that renders no rgb_array frames is refused in
one line."""

import json

import numpy as np
import pytest
from helpers import cli_run, train_quietly

from distributed_ac.config.schema import Config

pytest.importorskip("pettingzoo")
pytest.importorskip("moviepy")
pytestmark = pytest.mark.e2e

TTT = "pettingzoo.classic.tictactoe_v3:env"


def tiny_run(tmp_path_factory, env: str, **fields):
    """A serial run of a few hundred agent steps: weights that are not the initial ones."""
    cfg = Config(**{"env": env, "seed": 3, "serial": True, "num_workers": 1, "mode": "sync",
                    "envs_per_worker": 1, "rollout_length": 25, "hidden_sizes": (16,),
                    "total_env_steps": 300, **fields})
    path = tmp_path_factory.mktemp("video") / "run"
    train_quietly(cfg, path)
    return path


@pytest.fixture(scope="module")
def spread_run(tmp_path_factory):
    pytest.importorskip("mpe2")
    return tiny_run(tmp_path_factory, "parallel_envs:spread")


@pytest.fixture(scope="module", params=["parallel_envs:spread", "parallel_envs:spread_aec"])
def either_spread_run(request, spread_run, tmp_path_factory):
    """simple_spread as a Parallel env, and through the AEC API (aec_to_parallel)."""
    if request.param == "parallel_envs:spread":
        return spread_run
    return tiny_run(tmp_path_factory, request.param)


def evaluate(capsys, run, *flags) -> dict:
    code, out, err = cli_run(capsys, "evaluate", str(run), *flags)
    assert code == 0, err
    return json.loads(out.strip().splitlines()[-1])


def frames_of(clip) -> int:
    """The number of frames in an MP4, counted by decoding it."""
    import imageio.v3 as iio

    return sum(1 for _ in iio.imiter(clip))


def recorded(capsys, run, tmp_path, episodes: int, *flags) -> tuple[dict, dict, list]:
    """The summary of `dac evaluate` without and with --video, and the clips written."""
    plain = evaluate(capsys, run, "--episodes", str(episodes), *flags)
    video = tmp_path / "video"
    filmed = evaluate(capsys, run, "--episodes", str(episodes), "--video", str(video), *flags)
    return plain, filmed, sorted(video.iterdir())


def test_a_pettingzoo_env_s_episodes_are_recorded_one_file_each_unchanged(either_spread_run,
                                                                          tmp_path, capsys):
    plain, filmed, clips = recorded(capsys, either_spread_run, tmp_path, 2)
    assert filmed["returns"] == plain["returns"]  # rendering changed no episode
    assert [c.name for c in clips] == ["eval-episode-0.mp4", "eval-episode-1.mp4"]
    assert all(c.stat().st_size > 1000 for c in clips)
    # simple_spread's episodes are 25 steps (max_cycles): the reset's frame and 25 more
    assert [frames_of(c) for c in clips] == [26, 26]


def test_recording_follows_record_video_s_schedule(spread_run, tmp_path, capsys):
    """Of 3 episodes, 0 and 1 are recorded (the schedule's 0, 1, 8, 27, ...), not 2."""
    plain, filmed, clips = recorded(capsys, spread_run, tmp_path, 3, "--deterministic")
    assert filmed["returns"] == plain["returns"]
    assert [c.name for c in clips] == ["eval-episode-0.mp4", "eval-episode-1.mp4"]


def test_a_self_play_game_is_recorded_one_frame_a_move_and_reply(tmp_path_factory, tmp_path,
                                                                 capsys):
    run = tiny_run(tmp_path_factory, TTT, self_play=True, rollout_length=8,
                   total_env_steps=32)
    plain, filmed, clips = recorded(capsys, run, tmp_path, 2, "--opponent", "random")
    assert filmed["returns"] == plain["returns"]
    assert [c.name for c in clips] == ["eval-episode-0.mp4", "eval-episode-1.mp4"]
    lengths = [frames_of(c) - 1 for c in clips]  # a step: the policy's move and the reply
    assert all(2 <= n <= 5 for n in lengths), lengths  # tic-tac-toe: 2 to 5 moves a player


def test_an_env_without_rgb_array_frames_is_refused_in_one_line(tmp_path_factory, tmp_path,
                                                                 capsys):
    run = tiny_run(tmp_path_factory, "parallel_envs:MatchId")  # render_modes: []
    video = tmp_path / "v"
    code, out, err = cli_run(capsys, "evaluate", str(run), "--video", str(video))
    assert code == 2 and out == "", out
    assert len(err.strip().splitlines()) == 1, err
    assert "does not render rgb_array frames (its render modes: [])" in err, err
    assert not video.exists()


def test_frames_of_counts_what_was_written(tmp_path):
    """frames_of, which the tests above rest on, reads back the frames save_video wrote."""
    from gymnasium.utils.save_video import save_video

    frames = [np.full((64, 64, 3), i * 20, np.uint8) for i in range(7)]
    save_video(frames, str(tmp_path), name_prefix="t", fps=10)
    assert frames_of(tmp_path / "t-episode-0.mp4") == 7
