"""The settings the peer benchmark (sb3_ppo.py) runs Stable-Baselines3 with, per env."""

from __future__ import annotations

# rl-baselines3-zoo tuned PPO hyperparameters, copied from hyperparams/ppo.yml of
# https://github.com/DLR-RM/rl-baselines3-zoo (file as of commit eec15dc, 2026-04-01;
# repository HEAD 22e3ff2). Keys are the zoo's own, values verbatim; the zoo key each
# entry comes from is in "zoo_key":
#   LunarLander-v3, LunarLanderContinuous-v3, Pendulum-v1: the zoo's entries of those ids
#     (older zoo files call the LunarLander ones -v2, with the same values).
#   HalfCheetah-v5, Hopper-v5: the zoo's tuned HalfCheetah-v4 / Hopper-v4 entries (the zoo
#     has no v5 entries; the values are unchanged since its -v3 entries).
# How the zoo applies them (rl_zoo3/exp_manager.py), reproduced in build() below:
#   n_envs (default 1) copies, each in a Monitor, in a DummyVecEnv, seeded with --seed;
#   normalize: true -> VecNormalize(norm_obs=True, norm_reward=True, gamma=<the PPO gamma>);
#   "lin_X" for learning_rate / clip_range -> X * progress_remaining (X down to 0; none of
#   these five entries uses one, but the parser is here for any that does);
#   policy_kwargs are the zoo's dict(...) strings, with activation_fn named as "nn.ReLU".
# n_timesteps is the zoo's own budget, kept for reference; --steps sets the budget here.
# Every PPO argument not listed takes SB3's default (learning_rate 3e-4, clip_range 0.2,
# batch_size 64, n_epochs 10, vf_coef 0.5, max_grad_norm 0.5, ...); the JSON line records
# the values the model actually used under "ppo_effective".
ZOO_PPO: dict[str, dict] = {
    "LunarLander-v3": {
        "zoo_key": "LunarLander-v3",
        "n_envs": 16,
        "n_timesteps": 1e6,
        "policy": "MlpPolicy",
        "n_steps": 1024,
        "batch_size": 64,
        "gae_lambda": 0.98,
        "gamma": 0.999,
        "n_epochs": 4,
        "ent_coef": 0.01,
    },
    "Pendulum-v1": {  # "# Tuned"
        "zoo_key": "Pendulum-v1",
        "n_envs": 4,
        "n_timesteps": 1e5,
        "policy": "MlpPolicy",
        "n_steps": 1024,
        "gae_lambda": 0.95,
        "gamma": 0.9,
        "n_epochs": 10,
        "ent_coef": 0.0,
        "learning_rate": 1e-3,
        "clip_range": 0.2,
        "use_sde": True,
        "sde_sample_freq": 4,
    },
    "HalfCheetah-v5": {  # "# Tuned"
        "zoo_key": "HalfCheetah-v4",
        "normalize": True,
        "n_envs": 1,
        "policy": "MlpPolicy",
        "n_timesteps": 1e6,
        "batch_size": 64,
        "n_steps": 512,
        "gamma": 0.98,
        "learning_rate": 2.0633e-05,
        "ent_coef": 0.000401762,
        "clip_range": 0.1,
        "n_epochs": 20,
        "gae_lambda": 0.92,
        "max_grad_norm": 0.8,
        "vf_coef": 0.58096,
        "policy_kwargs": {
            "log_std_init": -2,
            "ortho_init": False,
            "activation_fn": "nn.ReLU",
            "net_arch": {"pi": [256, 256], "vf": [256, 256]},
        },
    },
    "Hopper-v5": {  # "# Tuned"
        "zoo_key": "Hopper-v4",
        "normalize": True,
        "n_envs": 1,
        "policy": "MlpPolicy",
        "n_timesteps": 1e6,
        "batch_size": 32,
        "n_steps": 512,
        "gamma": 0.999,
        "learning_rate": 9.80828e-05,
        "ent_coef": 0.00229519,
        "clip_range": 0.2,
        "n_epochs": 5,
        "gae_lambda": 0.99,
        "max_grad_norm": 0.7,
        "vf_coef": 0.835671,
        "policy_kwargs": {
            "log_std_init": -2,
            "ortho_init": False,
            "activation_fn": "nn.ReLU",
            "net_arch": {"pi": [256, 256], "vf": [256, 256]},
        },
    },
}
# rl-zoo lists LunarLanderContinuous-v3 with the very same values as LunarLander-v3.
ZOO_PPO["CartPole-v1"] = {
    "zoo_key": "CartPole-v1",
    "n_envs": 8,
    "n_timesteps": 1e5,
    "policy": "MlpPolicy",
    "n_steps": 32,
    "batch_size": 256,
    "gae_lambda": 0.8,
    "gamma": 0.98,
    "n_epochs": 20,
    "ent_coef": 0.0,
    "learning_rate": "lin_0.001",
    "clip_range": "lin_0.2",
}
ZOO_PPO["LunarLanderContinuous-v3"] = {**ZOO_PPO["LunarLander-v3"],
                                     "zoo_key": "LunarLanderContinuous-v3"}
# sb3-contrib's RecurrentPPO, from the zoo's hyperparams/ppo_lstm.yml (@ 038ab16); the env
# is the zoo's CartPoleNoVel-v1: CartPole-v1 with both velocities multiplied by 0.
ZOO_PPO["CartPoleNoVel-v1"] = {**ZOO_PPO["CartPole-v1"], "zoo_key": "CartPoleNoVel-v1",
                               "policy": "MlpLstmPolicy", "algo": "RecurrentPPO"}
# sb3-contrib's MaskablePPO on distributed_ac's MaskedChoice (the zoo has no entry for it):
# the settings `dac train` runs it with in benchmarks/spaces/masked-choice.yaml (16 envs x
# 16 steps, 4 epochs of 64-sample minibatches, rate 3e-3, one hidden layer of 32).
ZOO_PPO["MaskedChoice"] = {"zoo_key": None, "n_timesteps": 3e4, "algo": "MaskablePPO",
                           "policy": "MlpPolicy", "n_envs": 16, "n_steps": 16,
                           "batch_size": 64, "n_epochs": 4, "learning_rate": 3e-3,
                           "ent_coef": 0.0, "policy_kwargs": {"net_arch": [32]}}
ZOO_SOURCE = "DLR-RM/rl-baselines3-zoo hyperparams/ppo.yml @ eec15dc"
