#!/usr/bin/env python3
"""The independent twin of `d5 rl cartpole --agent a2c`: the same algorithm written in PyTorch on
CartPole-v1 transcribed in NumPy from Gym's published source (not from d5), with d5's defaults:
8 copies, 5-step rollouts, gamma 0.99, separate policy and value MLPs with two tanh layers of 64
units (nn.Linear's initialization), value coefficient 0.5, no entropy bonus, Adam. Prints one JSON
line per seed: environment steps and seconds until the mean return of the last 100 episodes met
the target, or null.

usage: twin_a2c_cartpole.py --seeds 1,2,3 [--lr 0.001] [--target 475] [--max-env-steps 300000]
"""
import argparse
import json
import math
import time

import numpy as np
import torch

GRAVITY, CART, POLE, HALF, FORCE, TAU = 9.8, 1.0, 0.1, 0.5, 10.0, 0.02
TOTAL, POLE_ML = CART + POLE, POLE * HALF
X_LIMIT, THETA_LIMIT = 2.4, 12 * 2 * math.pi / 360


class CartPoles:
    """n CartPole-v1 copies with auto-reset (Gymnasium's vector semantics)."""

    def __init__(self, n, rng):
        self.rng = rng
        self.s = rng.uniform(-0.05, 0.05, size=(n, 4))
        self.t = np.zeros(n, dtype=np.int64)

    def step(self, action):
        x, x_dot, th, th_dot = self.s.T
        force = np.where(action == 1, FORCE, -FORCE)
        # Gym's scalar math.cos/math.sin (glibc's, as d5's std::cos): NumPy's vector cos and sin fall
        # back to glibc per call when the fresh output happens to sit next to the input, which made the
        # twin's last bits, and over 10^5 steps its result, depend on the heap layout of each process.
        c = np.fromiter(map(math.cos, th), dtype=np.float64, count=len(th))
        s = np.fromiter(map(math.sin, th), dtype=np.float64, count=len(th))
        temp = (force + POLE_ML * th_dot ** 2 * s) / TOTAL
        th_acc = (GRAVITY * s - c * temp) / (HALF * (4.0 / 3.0 - POLE * c ** 2 / TOTAL))
        x_acc = temp - POLE_ML * th_acc * c / TOTAL
        self.s = np.stack([x + TAU * x_dot, x_dot + TAU * x_acc, th + TAU * th_dot, th_dot + TAU * th_acc], axis=1)
        self.t += 1
        terminated = (np.abs(self.s[:, 0]) > X_LIMIT) | (np.abs(self.s[:, 2]) > THETA_LIMIT)
        truncated = ~terminated & (self.t >= 500)
        final = self.s.copy()
        ended = terminated | truncated
        if ended.any():
            self.s[ended] = self.rng.uniform(-0.05, 0.05, size=(int(ended.sum()), 4))
            self.t[ended] = 0
        return np.ones(len(action)), terminated, truncated, final


def mlp(inputs, out):
    return torch.nn.Sequential(torch.nn.Linear(inputs, 64), torch.nn.Tanh(), torch.nn.Linear(64, 64), torch.nn.Tanh(),
                               torch.nn.Linear(64, out))


def run(seed, lr, target, max_steps, copies=8, rollout=5, gamma=0.99):
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    env = CartPoles(copies, rng)
    pi, v = mlp(4, 2), mlp(4, 1)
    opt = torch.optim.Adam(list(pi.parameters()) + list(v.parameters()), lr=lr)
    returns, recent, steps, start = np.zeros(copies), [], 0, time.perf_counter()
    while steps < max_steps:
        obs_b, act_b, rew_b, cut_b, val_b = [], [], [], [], []
        for _ in range(rollout):
            obs = torch.tensor(env.s, dtype=torch.float32)
            with torch.no_grad():
                logits, value = pi(obs), v(obs).squeeze(1)
            action = torch.distributions.Categorical(logits=logits).sample().numpy()
            reward, term, trunc, final = env.step(action)
            steps += copies
            cut = np.full(copies, np.nan)
            cut[term] = 0.0
            if trunc.any():
                with torch.no_grad():
                    cut[trunc] = gamma * v(torch.tensor(final[trunc], dtype=torch.float32)).squeeze(1).numpy()
            returns += reward
            for i in np.flatnonzero(term | trunc):
                recent = (recent + [returns[i]])[-100:]
                returns[i] = 0
                if len(recent) == 100 and np.mean(recent) >= target:
                    return steps, time.perf_counter() - start
            obs_b.append(obs)
            act_b.append(torch.tensor(action))
            rew_b.append(reward)
            cut_b.append(cut)
            val_b.append(value.numpy())
        with torch.no_grad():
            ret = v(torch.tensor(env.s, dtype=torch.float32)).squeeze(1).numpy().astype(np.float64)
        targets = []
        for t in reversed(range(rollout)):
            ret = rew_b[t] + np.where(np.isnan(cut_b[t]), gamma * ret, np.nan_to_num(cut_b[t]))
            targets.append(ret)
        targets = torch.tensor(np.stack(targets[::-1]), dtype=torch.float32).reshape(-1)
        obs = torch.cat(obs_b)
        actions = torch.cat(act_b)
        advantage = targets - torch.tensor(np.concatenate(val_b), dtype=torch.float32)
        log_pi = torch.log_softmax(pi(obs), dim=1).gather(1, actions.unsqueeze(1)).squeeze(1)
        loss = -(log_pi * advantage).mean() + 0.5 * ((v(obs).squeeze(1) - targets) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    return None, time.perf_counter() - start


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--seeds", default="1")
    p.add_argument("--lr", type=float, default=0.001)
    p.add_argument("--target", type=float, default=475)
    p.add_argument("--max-env-steps", type=int, default=300000)
    a = p.parse_args()
    torch.set_num_threads(1)
    for seed in [int(s) for s in a.seeds.split(",")]:
        steps, seconds = run(seed, a.lr, a.target, a.max_env_steps)
        print(json.dumps({"seed": seed, "env_steps_to_target": steps, "seconds": round(seconds, 3)}), flush=True)


if __name__ == "__main__":
    main()
