#!/usr/bin/env python3
"""The independent twin of `d5 rl cartpole --agent dqn`: deep Q-learning in PyTorch on CartPole-v1
transcribed from Gym (twin_a2c_cartpole.CartPoles), with d5's semantics: `envs` copies stepped
together, epsilon annealed linearly from 1 over a fraction of the budget, a replay ring of the last
`buffer` transitions (truncations keep their final observation and bootstrap), one Adam step on
`batch` uniformly drawn transitions per `train_every` environment steps once `learning_starts`
have passed, Huber loss on the taken action's TD error against a target network copied every
`target_every` environment steps; Q is an MLP with two ReLU layers. Prints one JSON line per seed.

usage: twin_dqn_cartpole.py --seeds 1,2 [--target 195] [--max-env-steps 150000] [--lr 0.001] ...
"""
import argparse
import json
import os
import sys
import time

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from twin_a2c_cartpole import CartPoles  # noqa: E402


def q_network(hidden):
    return torch.nn.Sequential(torch.nn.Linear(4, hidden), torch.nn.ReLU(), torch.nn.Linear(hidden, hidden),
                               torch.nn.ReLU(), torch.nn.Linear(hidden, 2))


def run(seed, a):
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    env = CartPoles(a.envs, rng)
    q, target = q_network(a.hidden), q_network(a.hidden)
    target.load_state_dict(q.state_dict())
    opt = torch.optim.Adam(q.parameters(), lr=a.lr)
    cap = a.buffer
    obs_b, next_b = np.zeros((cap, 4)), np.zeros((cap, 4))
    act_b, rew_b, term_b = np.zeros(cap, dtype=np.int64), np.zeros(cap), np.zeros(cap)
    head = size = steps = due = since_target = 0
    returns, recent, start = np.zeros(a.envs), [], time.perf_counter()
    anneal = max(1.0, a.epsilon_fraction * a.max_env_steps)
    while steps < a.max_env_steps:
        eps = 1.0 + min(1.0, steps / anneal) * (a.epsilon_end - 1.0)
        before = env.s.copy()
        with torch.no_grad():
            greedy = q(torch.tensor(before, dtype=torch.float32)).argmax(1).numpy()
        explore = rng.random(a.envs) < eps
        action = np.where(explore, rng.integers(0, 2, a.envs), greedy)
        reward, term, trunc, final = env.step(action)
        steps += a.envs
        ended = term | trunc
        nxt = np.where(ended[:, None], final, env.s)
        for i in range(a.envs):
            obs_b[head], next_b[head], act_b[head], rew_b[head], term_b[head] = before[i], nxt[i], action[i], reward[i], term[i]
            head = (head + 1) % cap
            size = min(size + 1, cap)
        returns += reward
        for i in np.flatnonzero(ended):
            recent = (recent + [returns[i]])[-100:]
            returns[i] = 0
            if len(recent) == 100 and np.mean(recent) >= a.target:
                return steps, time.perf_counter() - start, float(np.mean(recent))
        since_target += a.envs
        if steps < a.learning_starts:
            continue
        due += a.envs
        while due >= a.train_every:
            due -= a.train_every
            k = rng.integers(0, size, a.batch)
            with torch.no_grad():
                best = target(torch.tensor(next_b[k], dtype=torch.float32)).max(1).values
            y = torch.tensor(rew_b[k], dtype=torch.float32) + a.gamma * (1 - torch.tensor(term_b[k], dtype=torch.float32)) * best
            pred = q(torch.tensor(obs_b[k], dtype=torch.float32)).gather(1, torch.tensor(act_b[k]).unsqueeze(1)).squeeze(1)
            loss = torch.nn.functional.smooth_l1_loss(pred, y)
            opt.zero_grad()
            loss.backward()
            opt.step()
        if since_target >= a.target_every:
            target.load_state_dict(q.state_dict())
            since_target = 0
    return None, time.perf_counter() - start, float(np.mean(recent)) if recent else None


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--seeds", default="1")
    p.add_argument("--target", type=float, default=195)
    p.add_argument("--max-env-steps", type=int, default=150000)
    p.add_argument("--lr", type=float, default=0.001)
    p.add_argument("--hidden", type=int, default=128)
    p.add_argument("--envs", type=int, default=8)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--buffer", type=int, default=50000)
    p.add_argument("--learning-starts", type=int, default=1000)
    p.add_argument("--train-every", type=int, default=4)
    p.add_argument("--target-every", type=int, default=1000)
    p.add_argument("--epsilon-fraction", type=float, default=0.1)
    p.add_argument("--epsilon-end", type=float, default=0.05)
    p.add_argument("--gamma", type=float, default=0.99)
    a = p.parse_args()
    torch.set_num_threads(1)
    for seed in [int(s) for s in a.seeds.split(",")]:
        steps, seconds, last = run(seed, a)
        print(json.dumps({"seed": seed, "env_steps_to_target": steps, "seconds": round(seconds, 3), "last_mean_return": last}),
              flush=True)


if __name__ == "__main__":
    main()
