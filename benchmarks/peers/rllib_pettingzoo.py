"""RLlib's PPO on MPE's simple_spread through its PettingZoo wrapper: the multi-agent peer.

One policy shared by the three agents (RLlib's parameter sharing: every agent mapped to
one module), discrete actions, 25-step episodes, local_ratio 0.5, as
`dac train --env mpe2.simple_spread_v3:parallel_env` trains it. Runs in the peers' own
virtual environment (README.md), never the project's:

    /tmp/rllib-venv/bin/python benchmarks/peers/rllib_pettingzoo.py --agent-steps 1500000

Prints one JSON line per training iteration and a last one with the final figures.
The return reported is one agent's episode return (RLlib's episode return, the sum over
the three agents, divided by 3), the unit docs/notes/multi-agent.md reports.
"""

from __future__ import annotations

import argparse
import json
import time

AGENTS = 3


def make_env(_config=None):
    from mpe2 import simple_spread_v3
    from ray.rllib.env.wrappers.pettingzoo_env import ParallelPettingZooEnv

    return ParallelPettingZooEnv(simple_spread_v3.parallel_env(
        N=AGENTS, continuous_actions=False, max_cycles=25, local_ratio=0.5))


def config(args):
    from ray.rllib.algorithms.ppo import PPOConfig
    from ray.rllib.core.rl_module.multi_rl_module import MultiRLModuleSpec
    from ray.rllib.core.rl_module.rl_module import RLModuleSpec
    from ray.tune.registry import register_env

    register_env("simple_spread", make_env)
    return (PPOConfig()
            .environment("simple_spread")
            .env_runners(num_env_runners=args.runners, num_envs_per_env_runner=args.envs)
            .multi_agent(policies={"shared"}, policy_mapping_fn=lambda agent, *a, **k: "shared")
            .rl_module(rl_module_spec=MultiRLModuleSpec(rl_module_specs={"shared": RLModuleSpec()}))
            .training(train_batch_size_per_learner=args.batch, minibatch_size=args.minibatch,
                      num_epochs=args.epochs, lr=args.lr, entropy_coeff=args.entropy,
                      gamma=0.99, lambda_=0.95, clip_param=0.2)
            .debugging(seed=args.seed))


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--agent-steps", type=int, default=1_500_000)
    p.add_argument("--runners", type=int, default=2)
    p.add_argument("--envs", type=int, default=4)
    p.add_argument("--batch", type=int, default=6144, help="env steps an update (RLlib's unit)")
    p.add_argument("--minibatch", type=int, default=768)
    p.add_argument("--epochs", type=int, default=10)
    p.add_argument("--lr", type=float, default=3e-4)
    p.add_argument("--entropy", type=float, default=0.01)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()
    import ray

    ray.init(num_cpus=args.runners + 1, include_dashboard=False)
    algo = config(args).build_algo()
    start, last = time.monotonic(), {}
    while True:
        result = algo.train()
        runners = result.get("env_runners", {})
        steps = runners.get("num_agent_steps_sampled_lifetime", 0)
        if isinstance(steps, dict):
            steps = sum(steps.values())
        episode = runners.get("episode_return_mean")
        last = {"agent_steps": int(steps), "wall_s": round(time.monotonic() - start, 1),
                "agent_return_mean": None if episode is None else episode / AGENTS}
        print(json.dumps(last), flush=True)
        if steps >= args.agent_steps:
            break
    print(json.dumps({"peer": "rllib PPO", "ray": ray.__version__, "env": "simple_spread_v3",
                      **vars(args), **last}), flush=True)
    algo.stop()
    ray.shutdown()


if __name__ == "__main__":
    main()
