"""One typed config: YAML in and out, flags over YAML, checks at load time."""

import dataclasses

import pytest
from helpers import dac

from distributed_ac.commands.train import parse_train_args
from distributed_ac.config.schema import Config, dump_yaml, from_dict, load_yaml
from distributed_ac.core.errors import ConfigError


def test_yaml_round_trip_gives_the_same_config(tmp_path):
    cfg = Config(env="Pendulum-v1", hidden_sizes=(32, 32, 16), stop_at_return=-200.0, mode="sync")
    dump_yaml(cfg, tmp_path / "c.yaml")
    assert load_yaml(tmp_path / "c.yaml") == cfg


def test_flags_override_the_yaml_file_which_overrides_defaults(tmp_path):
    (tmp_path / "c.yaml").write_text("env: Pendulum-v1\nnum_workers: 3\ngamma: 0.9\n")
    args = parse_train_args(["--config", str(tmp_path / "c.yaml"), "--gamma", "0.5",
                             "--hidden-sizes", "8", "8", "--no-preset"])
    assert args.cfg.env == "Pendulum-v1" and args.cfg.num_workers == 3
    assert args.cfg.gamma == 0.5 and args.cfg.hidden_sizes == (8, 8)
    assert args.cfg.entropy_coef == Config().entropy_coef


def test_yaml_scientific_notation_is_accepted_for_integer_fields():
    assert from_dict({"total_env_steps": 2e6}).total_env_steps == 2_000_000


@pytest.mark.parametrize("values, message", [
    ({"gamma": 1.5}, "gamma must be in"),
    ({"c_bar": 1.5}, r"c_bar \(1.5\) must be <= rho_bar \(1.0\)"),
    ({"batches_per_update": -1}, "batches_per_update must be >= 0"),
    ({"target_tau": 0.0}, "target_tau"),
    ({"core": "lstm", "target_sync_every": 2, "bootstrap_values": "learner"},
     "bootstrap_values learner with a recurrent core needs"),
    ({"mode": "fast"}, "'mode' must be one of"),
    ({"envs_per_worker": "many"}, "'envs_per_worker' must be int"),
    ({"hidden_sizes": []}, "hidden_sizes"),
    ({"total_env_steps": 10}, "smaller than one batch"),
    ({"minibatches": 4}, r"renamed: minibatches \(now minibatch_size, in samples\)"),
    ({"num_envs": 0}, "num_envs must be >= 1"),
    ({"learning_rate": 1e-3}, "unknown config field"),
    ({"actor_lr_decay_rate": 1.5}, "decay_rate"),
    ({"vf_loss_clip": -1.0}, r"vf_loss_clip must be >= 0"),
])
def test_invalid_values_are_refused_with_a_clear_message(values, message):
    with pytest.raises(ConfigError, match=message):
        from_dict(values)


def test_malformed_yaml_is_a_config_error(tmp_path):
    (tmp_path / "bad.yaml").write_text("env: [unclosed\n")
    with pytest.raises(ConfigError, match="not valid YAML at line"):
        load_yaml(tmp_path / "bad.yaml")


def test_train_help_lists_every_field_with_its_help():
    out = dac("train", "--help", env={"COLUMNS": "200", "PATH": ""})
    assert out.returncode == 0
    for f in dataclasses.fields(Config):
        assert "--" + f.name.replace("_", "-") in out.stdout, f.name
    assert "Discount factor." in out.stdout


@pytest.mark.parametrize("argv, needle", [
    (["train", "--gamma", "7"], "gamma must be in [0, 1]"),
    (["train", "--env", "NoSuchEnv-v9"], "unknown environment id 'NoSuchEnv-v9'"),
    (["frobnicate"], "unknown command 'frobnicate'"),
])
def test_cli_bad_input_is_one_line_and_exit_code_2(argv, needle):
    out = dac(*argv)
    assert out.returncode == 2
    assert needle in out.stderr and "Traceback" not in out.stderr


def test_a_shipped_preset_is_the_base_that_config_files_and_flags_override(tmp_path, monkeypatch):
    from distributed_ac.commands.train import train_preset
    from distributed_ac.config import presets

    monkeypatch.setattr(presets, "DIR", tmp_path)
    (tmp_path / "Pendulum-v1.yaml").write_text("gamma: 0.9\nentropy_coef: 0.003\nactor_lr: 0.002\n")
    (tmp_path / "ALE_Pong-v5.yaml").write_text("gamma: 0.97\n")
    assert presets.available() == ["ALE_Pong-v5", "Pendulum-v1"]
    assert presets.path_for("ALE/Pong-v5") == tmp_path / "ALE_Pong-v5.yaml"
    assert train_preset(["--env", "CartPole-v1"]) is None  # no file of its own, no default.yaml
    cfg = parse_train_args(["--env", "Pendulum-v1"]).cfg
    assert (cfg.gamma, cfg.entropy_coef, cfg.actor_lr) == (0.9, 0.003, 0.002)
    (tmp_path / "mine.yaml").write_text("env: Pendulum-v1\nentropy_coef: 0.0\n")
    cfg = parse_train_args(["--config", str(tmp_path / "mine.yaml"), "--actor-lr", "0.001"]).cfg
    assert (cfg.gamma, cfg.entropy_coef, cfg.actor_lr) == (0.9, 0.0, 0.001)  # preset < file < flag
    cfg = parse_train_args(["--env", "Pendulum-v1", "--no-preset"]).cfg
    assert (cfg.gamma, cfg.entropy_coef) == (Config().gamma, Config().entropy_coef)


def test_an_env_without_a_preset_starts_from_the_default_one(tmp_path, monkeypatch):
    from distributed_ac.commands.train import train_preset
    from distributed_ac.config import presets

    monkeypatch.setattr(presets, "DIR", tmp_path)
    (tmp_path / "Pendulum-v1.yaml").write_text("gamma: 0.9\n")
    (tmp_path / "default.yaml").write_text("gamma: 0.95\npolicy_loss: clip\n")
    assert presets.available() == ["Pendulum-v1"]  # default.yaml is no env's
    assert train_preset(["--env", "Acrobot-v1"]) == tmp_path / "default.yaml"
    assert parse_train_args(["--env", "Acrobot-v1"]).cfg.gamma == 0.95
    assert parse_train_args(["--env", "Pendulum-v1"]).cfg.gamma == 0.9  # its own, not both
    assert parse_train_args(["--env", "Pendulum-v1"]).cfg.policy_loss == Config().policy_loss
    cfg = parse_train_args(["--env", "Acrobot-v1", "--gamma", "0.5"]).cfg
    assert (cfg.gamma, cfg.policy_loss) == (0.5, "clip")
    assert parse_train_args(["--env", "Acrobot-v1", "--no-preset"]).cfg.gamma == Config().gamma
    assert presets.path_for("default") is None  # not an env id's file


def test_auto_observation_normalisation_is_on_for_vectors_and_off_for_images():
    from distributed_ac.models.spec import encoder_for, obs_normalized

    auto = Config(normalize_obs=None)
    assert obs_normalized(auto, (8,)) and not obs_normalized(auto, (36, 36, 1))
    assert encoder_for(auto, (36, 36, 1)) == "nature"  # auto never asks images for it
    assert not obs_normalized(Config(), (8,))
    with pytest.raises(ConfigError, match="normalize_obs is for vector observations"):
        encoder_for(Config(normalize_obs=True), (36, 36, 1))


def test_every_shipped_preset_is_a_valid_config_for_its_env():
    from distributed_ac.config import presets

    for name in presets.available():
        cfg = load_yaml(presets.DIR / f"{name}.yaml")
        assert presets.stem_of(cfg.env) == name, f"{name}.yaml trains {cfg.env}"


def test_the_fallback_presets_are_valid_configs_that_leave_the_env_alone():
    from distributed_ac.config import presets

    for stem in presets.FALLBACKS:
        cfg = load_yaml(presets.DIR / f"{stem}.yaml")
        assert cfg.env == Config().env, stem  # it must not pick the env: it serves many
    assert presets.for_env("Acrobot-v1") == presets.DIR / "default.yaml"
    assert presets.for_env("ALE/Pong-v5") == presets.DIR / "atari.yaml"
    assert presets.for_env("popgym-CountRecallHard-v0") == presets.DIR / "popgym.yaml"
    assert (presets.for_env("mpe2.simple_spread_v3:parallel_env")
            == presets.DIR / "mpe2.simple_spread_v3_parallel_env.yaml")  # an entry point's
    assert load_yaml(presets.DIR / "popgym.yaml").core == "lstm"  # memory tasks
    atari = load_yaml(presets.DIR / "atari.yaml", Config(env="ALE/Pong-v5"))
    assert atari.normalize_obs is False and atari.topology == "shared"
    assert presets.for_env("CartPole-v1") == presets.DIR / "CartPole-v1.yaml"
    # CartPole's file spells out the base it was tuned with: README's first command
    # trains exactly what --no-preset does
    assert load_yaml(presets.DIR / "CartPole-v1.yaml") == Config()


def test_the_preset_line_names_a_suites_file_as_the_suites():
    from distributed_ac.commands.train import preset_note

    note = preset_note(["--env", "popgym-CountRecallEasy-v0"], "popgym-CountRecallEasy-v0")
    assert "settings for its suite (popgym-*) from distributed_ac/config/presets/popgym.yaml" in note
    assert "the defaults for such envs" in preset_note(["--env", "Acrobot-v1"], "Acrobot-v1")
