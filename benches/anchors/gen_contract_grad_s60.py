"""PyTorch's gradients for session 60's ops on Vars (strata-autograd's
tests/suite/contract_grad_s60.rs): crates/strata-autograd/tests/data/contract_grad_s60.json.

Each case: f64 operands (values row-major, shape), the op's arguments, a
weight `w` of the result's shape, and the gradients of sum(op(...) * w) for
every operand (PyTorch 2.15, CPU, one thread).

    OMP_NUM_THREADS=1 /tmp/tv/bin/python benches/anchors/gen_contract_grad_s60.py
"""
import json, os
import torch

torch.set_num_threads(1)
torch.manual_seed(6060)
D = torch.float64
cases = []


def add(name, op, shapes, args, f):
    xs = [torch.randn(s, dtype=D, requires_grad=True) for s in shapes]
    out = f(*xs)
    w = torch.randn(out.shape, dtype=D)
    (out * w).sum().backward()
    cases.append({
        "name": name, "op": op, "args": args,
        "inputs": [{"shape": list(x.shape), "values": x.detach().reshape(-1).tolist()} for x in xs],
        "w": w.reshape(-1).tolist(), "out_shape": list(out.shape),
        "grads": [x.grad.reshape(-1).tolist() for x in xs],
    })


for k, (eq, shapes) in enumerate([("ij,jk->ik", [[3, 4], [4, 2]]), ("bij,bjk->bik", [[2, 3, 4], [2, 4, 2]]), ("ii->i", [[3, 3]]),
                                  ("ij->", [[2, 3]]), ("i,j->ij", [[3], [2]]), ("abc,cd,de->abe", [[2, 2, 3], [3, 2], [2, 2]]),
                                  ("...ij,...jk", [[2, 2, 3], [3, 2]]), ("iij->j", [[2, 2, 3]]), ("ij,kj->ik", [[3, 1], [2, 4]]), ("i,i", [[4], [4]])]):
    add(f"einsum_{k}", "einsum", shapes, {"eq": eq}, lambda *t, eq=eq: torch.einsum(eq, *t))
for k, (sa, sb, dims) in enumerate([([3, 4], [4, 2], 1), ([2, 3, 4], [3, 4, 2], 2), ([2, 3, 4], [4, 3, 2], [[1, 2], [1, 0]]), ([2, 3], [2, 1], [[0], [0]])]):
    add(f"tensordot_{k}", "tensordot", [sa, sb], {"dims": dims}, lambda a, b, d=dims: torch.tensordot(a, b, dims=d))
add("inner", "inner", [[2, 3], [4, 3]], {}, torch.inner)
add("outer", "outer", [[3], [4]], {}, torch.outer)
add("kron", "kron", [[2, 3], [2, 2]], {}, torch.kron)
add("diagonal", "diagonal", [[3, 4, 2]], {"offset": 1, "dim1": 0, "dim2": 1}, lambda a: torch.diagonal(a, 1, 0, 1))
add("diagonal_neg", "diagonal", [[3, 4]], {"offset": -1, "dim1": 1, "dim2": 0}, lambda a: torch.diagonal(a, -1, 1, 0))
add("diag_1d", "diag", [[3]], {"offset": 1}, lambda a: torch.diag(a, 1))
add("diag_2d", "diag", [[3, 4]], {"offset": -1}, lambda a: torch.diag(a, -1))
add("diag_embed", "diag_embed", [[2, 3]], {"offset": 1, "dim1": 0, "dim2": 2}, lambda a: torch.diag_embed(a, 1, 0, 2))
add("trace", "trace", [[3, 4]], {}, torch.trace)
for k, (beta, alpha) in enumerate([(1, 1), (0.5, -2.0), (0, 1.5)]):
    add(f"baddbmm_{k}", "baddbmm", [[3, 1], [2, 3, 4], [2, 4, 1]], {"beta": beta, "alpha": alpha}, lambda c, x, y, b=beta, a=alpha: torch.baddbmm(c, x, y, beta=b, alpha=a))
    add(f"addbmm_{k}", "addbmm", [[2], [3, 2, 4], [3, 4, 2]], {"beta": beta, "alpha": alpha}, lambda c, x, y, b=beta, a=alpha: torch.addbmm(c, x, y, beta=b, alpha=a))
    add(f"addmv_{k}", "addmv", [[1], [3, 4], [4]], {"beta": beta, "alpha": alpha}, lambda c, m, v, b=beta, a=alpha: torch.addmv(c, m, v, beta=b, alpha=a))
    add(f"addr_{k}", "addr", [[3, 1], [3], [2]], {"beta": beta, "alpha": alpha}, lambda c, x, y, b=beta, a=alpha: torch.addr(c, x, y, beta=b, alpha=a))
for k, ws in enumerate([0.3, 0.8, -1.5]):
    add(f"lerp_s{k}", "lerp", [[2, 3], [3]], {"weight": ws}, lambda a, b, w=ws: torch.lerp(a, b, w))
add("lerp_t", "lerp", [[2, 3], [3], [2, 1]], {}, torch.lerp)
add("cross", "cross", [[4, 3], [4, 3]], {"dim": -1}, lambda a, b: torch.linalg.cross(a, b, dim=-1))
add("cross_bcast", "cross", [[3, 2, 1], [3, 1, 4]], {"dim": 0}, lambda a, b: torch.linalg.cross(a, b, dim=0))

out = os.path.join(os.path.dirname(__file__), "..", "..", "crates", "strata-autograd", "tests", "data", "contract_grad_s60.json")
with open(out, "w") as f:
    json.dump({"torch": torch.__version__, "cases": cases}, f, separators=(",", ":"))
print(len(cases), "cases ->", os.path.normpath(out))
