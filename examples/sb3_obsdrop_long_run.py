"""A long observational-dropout run on the harder swing-up, as the docs' long-run table.

RecurrentPPO with ObservationalDropoutPolicy and the reproduction's settings (16 envs side by
side, n_steps 128, minibatches of 1,024, lr 1e-3 decayed linearly to 0, [64, 64]
controller); every ``--every`` steps the mean return of 20 deterministic episodes (seeds
50,000+) and a checkpoint; at the end ``--episodes`` other episodes (seeds 90,000+) score
the last checkpoint. With ``--dream-steps`` a fresh PPO then trains that many steps inside
the agent's M (``WorldModelEnv``) and is scored in the real environment: the dream transfer.

python examples/sb3_obsdrop_long_run.py --p 0.1 --privileged-critic --dream-steps 500000
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import numpy as np
import torch
from sb3_contrib import RecurrentPPO
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.vec_env import VecNormalize

from paperports.experiments.obsdrop.agents import (
    LEARNING_RATE,
    agent_env,
    dream_transfer,
    evaluate_recurrent,
    make_agent,
    prediction_error,
)


class Checkpoints(BaseCallback):
    """Evaluates and saves the model every ``every`` environment steps."""

    def __init__(self, p: float, every: int, out: Path) -> None:
        super().__init__()
        self.p, self.every, self.next, self.out = p, every, every, out

    def _on_step(self) -> bool:
        if self.num_timesteps >= self.next:
            self.next += self.every
            assert isinstance(self.model, RecurrentPPO)
            curve = float(evaluate_recurrent(self.model, self.p, 20, 50_000).mean())
            print(f"{self.num_timesteps:>9,} steps: return {curve:.0f} (20 episodes)")
            self.model.save(self.out / f"obsdrop_p{self.p}_{self.num_timesteps}.zip")
        return True


def main(args: argparse.Namespace) -> float:
    # The networks are tiny: the docs' figures were measured with one thread per run (about
    # 1,800 steps/s on one core), two runs side by side on two cores.
    torch.set_num_threads(args.threads)
    settings: dict[str, Any] = {"gamma": args.gamma, "vf_coef": args.vf_coef}
    if args.constant_lr:
        settings["learning_rate"] = LEARNING_RATE
    policy_kwargs = {
        "world_model_kwargs": {
            "acceleration_scale": args.acceleration_scale,
            "zero_init": args.zero_init,
        },
        "prediction_loss_coef": args.prediction_loss,
        "critic_trains_world_model": args.critic_trains_model,
        "privileged_critic": args.privileged_critic,
        "critic_reads_belief": args.critic_reads_belief,
    }
    env = agent_env(args.p, args.seed, policy_kwargs)
    if args.normalize_reward:  # rewards only: the peek flag and the action stay as they are
        env = VecNormalize(env, norm_obs=False, norm_reward=True, gamma=args.gamma)
    model = make_agent(args.p, args.seed, env=env, policy_kwargs=policy_kwargs, **settings)
    args.out.mkdir(parents=True, exist_ok=True)
    model.learn(args.steps, callback=Checkpoints(args.p, args.every, args.out))
    returns = evaluate_recurrent(model, args.p, args.episodes, 90_000)
    mean = float(np.mean(returns))
    print(f"final: {mean:.0f} ± {np.std(returns):.0f} over {args.episodes} episodes")
    if args.dream_steps:
        error = prediction_error(model, args.p, 2_000, args.seed)
        dream = dream_transfer(model, args.dream_steps, args.seed, args.episodes)
        print(f"M's one-step error {error:.4f}; dream transfer: {dream:.0f} (real env)")
    return mean


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--p", type=float, default=0.1, help="peek probability")
    parser.add_argument("--steps", type=int, default=2_000_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--gamma", type=float, default=0.99)
    parser.add_argument("--vf-coef", type=float, default=0.5, help="the value loss's weight")
    parser.add_argument("--constant-lr", action="store_true", help="lr 1e-3 throughout")
    parser.add_argument("--normalize-reward", action="store_true")
    parser.add_argument(
        "--prediction-loss", type=float, default=0.0, help="the ablation's coefficient"
    )
    parser.add_argument(
        "--critic-trains-model", action="store_true", help="the value loss reaches M too"
    )
    parser.add_argument(
        "--privileged-critic", action="store_true", help="the critic reads the true state"
    )
    parser.add_argument(
        "--critic-reads-belief",
        action="store_true",
        help="with --privileged-critic, the critic reads the belief too",
    )
    parser.add_argument("--acceleration-scale", type=float, default=1.0, help="M's output scale")
    parser.add_argument("--zero-init", action="store_true", help="M starts at zero accelerations")
    parser.add_argument(
        "--dream-steps", type=int, default=0, help="PPO steps in M's dream (0: no transfer)"
    )
    parser.add_argument("--threads", type=int, default=1, help="torch threads")
    parser.add_argument("--every", type=int, default=200_000)
    parser.add_argument("--episodes", type=int, default=100)
    parser.add_argument("--out", type=Path, default=Path("runs/obsdrop"))
    main(parser.parse_args())
