"""Makes resume_s52_{sgd,adam,adamw}.safetensors for tests/suite/resume_s52.rs
(PyTorch 2.15, CPU): an optimizer stepped 3 times, its `state_dict()`
flattened to the dotted names of strata's src/optim/state.rs (Adam and
AdamW made `fused=True`: strata's CPU step rounds as PyTorch's fused CPU
kernel's vectorized loop, docs/autograd.md; 64 elements, no scalar tail;
the state dictionary is the same), the parameter
then (`x.p`), the gradients of 3 more steps (`x.grad.{3,4,5}`), and after
them PyTorch's parameter (`x.want.p`) and state (`x.want.<name>`).
Written without the safetensors package (its format: a u64 header length,
a JSON header, the raw little-endian data).

    OMP_NUM_THREADS=1 python gen_resume_s52.py
"""
import json, struct
import torch

DT = {torch.float32: "F32", torch.float64: "F64", torch.bool: "BOOL"}


def save(path, tensors):
    header, blobs, off = {}, [], 0
    for k in sorted(tensors):
        t = tensors[k].contiguous().cpu()
        b = t.numpy().tobytes()
        header[k] = {"dtype": DT[t.dtype], "shape": list(t.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def flat(opt, options):
    sd = opt.state_dict()
    out = {}
    for i, st in sd["state"].items():
        for k, v in st.items():
            out[f"state.{i}.{k}"] = v.clone()
    g = sd["param_groups"][0]
    for k in options:
        v = g[k]
        if isinstance(v, bool):
            if v:
                out[f"param_groups.0.{k}"] = torch.tensor(True)
        elif isinstance(v, tuple):
            out[f"param_groups.0.{k}"] = torch.tensor(v, dtype=torch.float64)
        else:
            out[f"param_groups.0.{k}"] = torch.tensor(float(v), dtype=torch.float64)
    return out


CASES = {
    "sgd": (lambda p: torch.optim.SGD([p], lr=0.05, momentum=0.9, nesterov=True, weight_decay=0.01),
            ["lr", "momentum", "weight_decay", "dampening", "nesterov", "maximize"]),
    "adam": (lambda p: torch.optim.Adam([p], lr=0.01, betas=(0.8, 0.95), eps=1e-7, amsgrad=True, fused=True),
             ["lr", "betas", "eps", "amsgrad", "maximize"]),
    "adamw": (lambda p: torch.optim.AdamW([p], lr=0.02, weight_decay=0.05, fused=True),
              ["lr", "betas", "eps", "weight_decay", "amsgrad", "maximize"]),
}
for name, (make, options) in CASES.items():
    torch.manual_seed(52)
    p = torch.nn.Parameter(torch.randn(64))
    grads = [torch.randn(64) * (0.5 + t) for t in range(6)]
    opt = make(p)
    for t in range(3):
        p.grad = grads[t].clone()
        opt.step()
    out = flat(opt, options)
    if name == "sgd":  # dampening 0 is the default: written only when set
        del out["param_groups.0.dampening"]
    out["x.p"] = p.detach().clone()
    for t in range(3, 6):
        out[f"x.grad.{t}"] = grads[t].clone()
        p.grad = grads[t].clone()
        opt.step()
    out["x.want.p"] = p.detach().clone()
    for k, v in flat(opt, options).items():
        if k.startswith("state."):
            out[f"x.want.{k}"] = v
    save(f"resume_s52_{name}.safetensors", out)
    print(name, sorted(out))
