"""Presets by what an env is: a bare Discrete observation (one state index) starts from
presets/tabular.yaml, whatever the env is called, and learns there."""

from __future__ import annotations

import json

import gymnasium as gym

from distributed_ac.commands.main import main
from distributed_ac.config import presets
from distributed_ac.training.presets import kind_of, preset_for, preset_note

TABULAR = presets.DIR / "tabular.yaml"


def made_frozen_lake():
    """A module:attr entry point whose env is FrozenLake under another name."""
    return gym.make("FrozenLake8x8-v1")


class Grid(gym.Env):
    """A user's tabular env with no spec: 4 states, reached by walking right."""

    observation_space = gym.spaces.Discrete(4)
    action_space = gym.spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.s = 0
        return self.s, {}

    def step(self, action):
        self.s = min(3, self.s + int(action))
        return self.s, float(self.s == 3), self.s == 3, False, {}


def test_a_bare_discrete_observation_is_tabular_whatever_the_env_is_called():
    assert preset_for("FrozenLake-v1") == (TABULAR, "FrozenLake-v1")
    assert preset_for("CliffWalking-v1") == (TABULAR, "CliffWalking-v1")
    assert preset_for(f"{__name__}:made_frozen_lake")[0] == TABULAR
    assert kind_of(f"{__name__}:Grid") == "tabular"
    # other observations keep the default; an env of its own keeps its file
    assert preset_for("Acrobot-v1")[0] == presets.DIR / "default.yaml"
    assert preset_for("Blackjack-v1")[0] == presets.DIR / "default.yaml"  # a Tuple
    assert preset_for("Taxi-v4")[0] == presets.DIR / "Taxi-v4.yaml"
    assert kind_of("no-such-env-v0") is None


def test_the_start_up_line_names_the_kind():
    note = preset_note(TABULAR, "FrozenLake-v1", "FrozenLake-v1")
    assert "one state index" in note and "presets/tabular.yaml" in note


def test_cliffwalking_learns_the_shortest_safe_path_on_its_kind_s_preset(tmp_path, capsys):
    """presets/default.yaml reads -1826, -3071 and -14766 at 300k (seeds 0-2): it walks
    off the cliff again and again; the tabular preset is above -20 by 37k-49k."""
    assert main(["train", "--env", "CliffWalking-v1", "--serial", "--seed", "0",
                 "--total-env-steps", "100000", "--run-dir", str(tmp_path / "run")]) == 0
    out, err = capsys.readouterr()
    assert "presets/tabular.yaml" in err
    summary = json.loads(out.strip().splitlines()[-1])
    assert summary["mean_return_100"] >= -20, summary
