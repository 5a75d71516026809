"""PPO on a batched toy control task simulated on the device, fp32, 24 iterations. The task: 2,048 parallel
environments with a 64-d state driven by fixed random linear dynamics (s' = 0.95 * s @ A + a @ B + noise), a
16-d continuous action, reward -(|s'|^2 mean) - 0.01 |a|^2, and per-environment episode limits of 32..256 steps
(finished environments are reset in place with torch.where). Each iteration collects a rollout whose length is drawn
from 64..256 steps: every step normalises the observation with running statistics, samples the Gaussian policy
(torch.distributions.Normal), steps the environments and appends six small (2048, x) tensors (obs, action, log-prob,
value, reward, done) to Python lists, which are torch.stack-ed at the end; the generalised advantage estimate (gamma
0.99, lambda 0.95) runs as a backward Python loop over the steps; the running observation mean and variance are
updated from the rollout. Then up to 4 epochs of 8 minibatches each (a randperm of the flattened rollout,
index_select of every buffer): actor (64 -> 512 -> 512 -> 256 -> 16, tanh, learned log-std) and critic (64 -> 512 ->
512 -> 256 -> 1) with the clipped surrogate (0.2), clipped value loss, entropy bonus, one Adam over both with
gradient clipping at 0.5; each minibatch's approximate KL is read with .item() and the epochs of an iteration stop
early once the last one passes 0.05. The buffers of one iteration are freed before the next, so the number and size
of the rollout tensors change every iteration. WL_DEVICE=cpu: 64 environments, rollouts of 8..24 steps, hidden 64,
3 iterations."""
import os, random, torch, torch.nn as nn
dev = os.environ.get("WL_DEVICE", "cuda")
small = dev == "cpu"
torch.manual_seed(83); rng = random.Random(83)
if small:
    E, (tlo, thi), Hd, iters = 64, (8, 24), 64, 3
else:
    E, (tlo, thi), Hd, iters = 2048, (64, 256), 512, 24
OBS, ACT, EPOCHS, MB, GAMMA, LAM, CLIP = 64, 16, 4, 8, 0.99, 0.95, 0.2


def mlp(out):
    return nn.Sequential(nn.Linear(OBS, Hd), nn.Tanh(), nn.Linear(Hd, Hd), nn.Tanh(), nn.Linear(Hd, Hd // 2), nn.Tanh(),
                         nn.Linear(Hd // 2, out))


actor, critic = mlp(ACT).to(dev), mlp(1).to(dev)
log_std = nn.Parameter(torch.full((ACT,), -0.5, device=dev))
params = list(actor.parameters()) + list(critic.parameters()) + [log_std]
opt = torch.optim.Adam(params, lr=3e-4, eps=1e-5)
A_dyn = torch.linalg.qr(torch.randn(OBS, OBS, device=dev))[0] * 0.95
B_dyn = torch.randn(ACT, OBS, device=dev) * 0.1
obs_mean, obs_var, obs_n = torch.zeros(OBS, device=dev), torch.ones(OBS, device=dev), 1e-4


def new_limits(n):
    return torch.randint(32, 257, (n,), device=dev)


state = torch.randn(E, OBS, device=dev)
t_env, limit = torch.zeros(E, dtype=torch.long, device=dev), new_limits(E)


def dist(obs_n_):
    return torch.distributions.Normal(actor(obs_n_), log_std.exp())


for it in range(iters):
    T = rng.randint(tlo, thi)
    buf = {k: [] for k in ("obs", "act", "logp", "val", "rew", "done")}
    with torch.no_grad():
        for t in range(T):                                  # rollout: many small tensors per step, kept in lists
            obs = ((state - obs_mean) / (obs_var + 1e-8).sqrt()).clamp(-10, 10)
            d = dist(obs)
            a = d.sample()
            buf["obs"].append(obs); buf["act"].append(a); buf["logp"].append(d.log_prob(a).sum(-1))
            buf["val"].append(critic(obs)[:, 0])
            state = 0.95 * state @ A_dyn + a.clamp(-1, 1) @ B_dyn + 0.05 * torch.randn_like(state)
            buf["rew"].append(-(state ** 2).mean(-1) - 0.01 * (a ** 2).sum(-1))
            t_env += 1
            done = t_env >= limit
            buf["done"].append(done.float())
            state = torch.where(done[:, None], torch.randn_like(state), state)
            t_env = torch.where(done, torch.zeros_like(t_env), t_env)
            limit = torch.where(done, new_limits(E), limit)
        obs = ((state - obs_mean) / (obs_var + 1e-8).sqrt()).clamp(-10, 10)
        last_val = critic(obs)[:, 0]
        b = {k: torch.stack(v) for k, v in buf.items()}      # (T, E, ...)
        del buf
        adv, gae = torch.zeros_like(b["rew"]), torch.zeros(E, device=dev)
        for t in reversed(range(T)):                        # GAE as a backward loop over the steps
            nxt = last_val if t == T - 1 else b["val"][t + 1]
            nonterm = 1.0 - b["done"][t]
            delta = b["rew"][t] + GAMMA * nxt * nonterm - b["val"][t]
            gae = delta + GAMMA * LAM * nonterm * gae
            adv[t] = gae
        ret = adv + b["val"]
        raw = b["obs"].view(-1, OBS) * (obs_var + 1e-8).sqrt() + obs_mean   # running observation statistics
        bm, bv, bn = raw.mean(0), raw.var(0), raw.shape[0]
        delta_m, tot = bm - obs_mean, obs_n + bn
        obs_var = (obs_var * obs_n + bv * bn + delta_m ** 2 * obs_n * bn / tot) / tot
        obs_mean, obs_n = obs_mean + delta_m * bn / tot, tot
        del raw
    flat = {k: v.reshape(T * E, *v.shape[2:]) for k, v in b.items()}
    flat["adv"], flat["ret"] = adv.reshape(-1), ret.reshape(-1)
    del b, adv, ret
    n, mb = T * E, T * E // MB
    for ep in range(EPOCHS):
        perm, kl = torch.randperm(n, device=dev), 0.0
        for i in range(MB):
            idx = perm[i * mb:(i + 1) * mb]
            m = {k: v.index_select(0, idx) for k, v in flat.items()}
            advn = (m["adv"] - m["adv"].mean()) / (m["adv"].std() + 1e-8)
            d = dist(m["obs"])
            logp = d.log_prob(m["act"]).sum(-1)
            ratio = (logp - m["logp"]).exp()
            pg = -torch.min(ratio * advn, ratio.clamp(1 - CLIP, 1 + CLIP) * advn).mean()
            v = critic(m["obs"])[:, 0]
            v_clip = m["val"] + (v - m["val"]).clamp(-CLIP, CLIP)
            vl = 0.5 * torch.max((v - m["ret"]) ** 2, (v_clip - m["ret"]) ** 2).mean()
            loss = pg + 0.5 * vl - 0.01 * d.entropy().sum(-1).mean()
            opt.zero_grad(set_to_none=True)
            loss.backward()
            nn.utils.clip_grad_norm_(params, 0.5)
            opt.step()
            kl = ((ratio - 1) - (logp - m["logp"])).mean().item()
            del m, d, loss
        if kl > 0.05:
            break
    del flat, perm
if dev.startswith("cuda"):
    torch.cuda.synchronize()
