"""Expected values for crates/strata-autograd/tests/suite/inplace_views.rs
(session 42): recorded in-place ops on views (PyTorch's CopySlices) and
views whose history is regenerated after their base was modified in place.

Run: python gen_inplace_views_s42.py   (PyTorch 2.x, CPU, float64)
Each case prints its name, the grad_fn names that matter and the gradients
(rounded to 6 decimals), which the Rust tests paste.
"""
import torch

torch.set_printoptions(precision=6)


def p(*vals):
    return torch.tensor(vals, dtype=torch.float64, requires_grad=True)


def show(name, **kw):
    parts = []
    for k, v in kw.items():
        if isinstance(v, torch.Tensor):
            v = [round(float(e), 6) for e in v.detach().reshape(-1)]
        parts.append(f"{k}={v}")
    print(f"{name}: " + "; ".join(parts))


def gname(t):
    return type(t.grad_fn).__name__ if t.grad_fn is not None else None


# 1. the brief's example: y = x * 2; y[1:3] *= 3; y.sum() and v.sum()
x = p(1, 2, 3, 4)
y = x * 2
v = y.narrow(0, 1, 2)
v.mul_(3)
show("narrow_mul_scalar", y=y, y_fn=gname(y), v_fn=gname(v))
y.sum().backward(retain_graph=True)
show("narrow_mul_scalar.base", xg=x.grad)
x.grad = None
v.sum().backward()
show("narrow_mul_scalar.view", xg=x.grad)

# 2. each op with a Var operand (broadcast) on a narrow of a 2-D base,
# weighted loss so every element's gradient differs.
w = torch.arange(1, 13, dtype=torch.float64).reshape(3, 4) / 4
for op in ["add_", "sub_", "mul_", "div_"]:
    x = p(*[0.5 + 0.25 * i for i in range(12)])
    b = p(1.5, -2.0, 2.5, 3.0)
    y = (x * 1.5).reshape(3, 4)
    v = y.narrow(0, 1, 2)
    getattr(v, op)(b)
    ((y * y) * w).sum().backward()
    show(f"narrow_{op[:-1]}_var", y=y, xg=x.grad, bg=b.grad)

# 3. transpose view, scalar ops and zero_
for op, arg in [("add_", 2.0), ("sub_", 0.5), ("mul_", -3.0), ("div_", 4.0), ("zero_", None)]:
    x = p(*[1.0 + i for i in range(6)])
    y = x.reshape(2, 3).pow(2)  # saves x, not y
    v = y.t()
    if arg is None:
        v.zero_()
    else:
        getattr(v, op)(arg)
    (y * w[:2, :3]).sum().backward()
    show(f"transpose_{op[:-1]}_scalar", xg=x.grad)

# 4. view of a view: permute then narrow then unsqueeze, mul_ by a Var
x = p(*[0.1 * (i + 1) for i in range(24)])
b = p(*[1.0 + 0.5 * i for i in range(4)])
y = x.reshape(2, 3, 4).sin()
vv = y.permute(2, 0, 1).narrow(1, 1, 1).squeeze(1)  # shape [4, 3]
vv.mul_(b.unsqueeze(1))
(y * y).sum().backward()
show("permute_narrow_squeeze_mul_var", vv_fn=gname(vv), xg=x.grad, bg=b.grad)

# 5. view/reshape that is a view, and flatten, add_ a Var of the view's shape
x = p(*[float(i) for i in range(8)])
b = p(*[10.0 * i for i in range(4)])
y = x * 3
v = y.view(2, 4).narrow(1, 2, 2).reshape(4)  # a narrow of [2,4] is not contiguous: reshape copies
print("reshape_copy_is_view:", v._base is not None and v.data_ptr() == y.data_ptr() + 2 * 8)
v2 = y.view(2, 4).narrow(0, 1, 1).flatten()
v2.add_(b)
(y * torch.arange(8, dtype=torch.float64)).sum().backward()
show("view_narrow_flatten_add_var", y=y, xg=x.grad, bg=b.grad)

# 6. untracked base: z = zeros(3); z[0:2].add_(x[1:3]); ((z*z) + x).sum()
x = p(1, 2, 3)
z = torch.zeros(3, dtype=torch.float64)
z.narrow(0, 0, 2).add_(x.narrow(0, 1, 2))
((z * z) + x).sum().backward()
show("untracked_base_add", z_fn=gname(z), xg=x.grad)

# 7. other views taken before the op: regenerated history
x = p(1, 2, 3, 4)
y = x * 1
a, c = y.narrow(0, 0, 2), y.narrow(0, 2, 2)
a.mul_(2)
c.mul_(3)  # c's history is out of date (a.mul_ rebased y): the op still is recorded on y's new one
(y * y).sum().backward()
show("two_halves", xg=x.grad)
x = p(1, 2, 3, 4)
y = x * 1
try:
    y.chunk(2)[0].mul_(2)
except RuntimeError as e:
    print("chunk_output_inplace: error:", str(e)[:60])
try:
    y.split(2)[1].transpose(0, 0).add_(x.narrow(0, 0, 2))
except RuntimeError as e:
    print("view_of_split_output_inplace: error:", str(e)[:60])
x = p(1, 2, 3)
y = x * 1
v = y.narrow(0, 0, 2)
y.mul_(2)
v.sum().backward()
show("view_before_base_mul", v_fn=gname(v), xg=x.grad)
x = p(1, 2, 3)
w3 = p(10, 20, 30)
y = x * 1
v = y.t()
y.add_(w3)
(v * v).sum().backward()
show("view_before_base_add_var", xg=x.grad, wg=w3.grad)
x = p(1, 2, 3, 4)
y = x * 1
v = y.view(2, 2)
vv = v.transpose(0, 1)
y.zero_()
(vv + 1).pow(2).sum().backward()
show("view_of_view_before_base_zero", xg=x.grad)
# another view modified in place: sibling regenerated
x = p(1, 2, 3, 4)
y = x * 1
a = y.narrow(0, 0, 3)
c = y.narrow(0, 2, 2)
a.mul_(5)
(c * c).sum().backward()
show("sibling_view_regenerated", c=c, xg=x.grad)

# 8. untracked base, view taken before: z = zeros; v = z[0:2]; z.add_(x)
x = p(1, 2, 3)
z = torch.zeros(3, dtype=torch.float64)
v = z.narrow(0, 0, 2)
vv = v.narrow(0, 0, 1)
z.add_(x)
((v * v).sum() + x.sum() + (vv * 3).sum()).backward()
show("untracked_view_before_base_add", v_fn=gname(v), xg=x.grad)

# 9. expand view taken before the base was modified
x = p(1, 2, 3)
y = x * 1
e = y.unsqueeze(0).expand(2, 3)
y.mul_(torch.tensor([2.0, 3.0, 4.0], dtype=torch.float64))
(e * torch.tensor([[1.0], [2.0]], dtype=torch.float64)).sum().backward()
show("expand_before_base_mul", xg=x.grad)

# 10. the other operand is another view of the same base, and self.
# PyTorch saves the operand (a view of y) and refuses the backward, as y
# changed; strata saves a copy of an operand sharing self's storage (its
# `y.mul_(&y)` rule), so the values below are PyTorch's with that copy
# made explicit (`.clone()`: same history, the old value saved).
x = p(1, 2, 3, 4)
y = x * 1
y.narrow(0, 0, 2).mul_(y.narrow(0, 2, 2).clone())
(y * torch.tensor([1.0, 2, 3, 4], dtype=torch.float64)).sum().backward()
show("other_operand_same_base", y=y, xg=x.grad)
x = p(1, 2, 3, 4)
y = x * 1
v = y.narrow(0, 1, 2)
v.mul_(v.clone())
(y * torch.tensor([1.0, 2, 3, 4], dtype=torch.float64)).sum().backward()
show("view_times_itself", y=y, xg=x.grad)

# 11. two in-place ops in a row on the same view, then base and view loss
x = p(1, 2, 3, 4, 5, 6)
b = p(2, 3)
y = x.reshape(3, 2) * 1
v = y.narrow(0, 1, 1).squeeze(0)
v.add_(b)
v.mul_(b)
(y.sum() + (v * v).sum()).backward()
show("two_ops_same_view", y=y, xg=x.grad, bg=b.grad)

# 12. saved tensor of the base modified through the view: error
x = p(1, 2, 3)
y = x * 1
s = y * y  # saves y
y.narrow(0, 0, 1).mul_(2)
try:
    s.sum().backward()
    print("saved_base_modified: no error")
except RuntimeError as e:
    print("saved_base_modified: error:", str(e).splitlines()[0][:90])

# 13. view of a leaf requiring grad: refused
x = p(1, 2, 3)
try:
    x.narrow(0, 0, 2).mul_(2)
except RuntimeError as e:
    print("view_of_leaf: error:", str(e)[:70])

# 14. no-grad mode: unchanged (no history)
x = p(1, 2, 3)
y = x * 1
v = y.narrow(0, 0, 2)
with torch.no_grad():
    v.mul_(10)
y.sum().backward()
show("no_grad_inplace_on_view", y=y, y_fn=gname(y), xg=x.grad)

# 15. retain_grad on the view follows its new value
x = p(1, 2, 3)
y = x * 1
v = y.narrow(0, 1, 2)
v.retain_grad()
v.mul_(3)
(y * y).sum().backward()
show("retain_grad_view", vg=v.grad, xg=x.grad)

# 16. a non-contiguous base with a storage offset (a leaf not requiring grad)
big = torch.arange(12, dtype=torch.float64).reshape(3, 4)
z = big.narrow(1, 1, 2).t()
x = p(1, 2)
z.narrow(1, 1, 2).mul_(x.unsqueeze(1))
(z * torch.arange(1, 7, dtype=torch.float64).reshape(2, 3)).sum().backward()
show("non_contiguous_base", z=z, xg=x.grad)

# 17. a retained gradient of the base follows its new history
x = p(1, 2, 3)
y = x * 1
y.retain_grad()
y.narrow(0, 1, 2).mul_(3)
(y * y).sum().backward()
show("retain_grad_base", y_fn=gname(y), yg=y.grad, xg=x.grad)

# ---- earlier sessions' tests that asserted a refusal, now PyTorch's values
# hostile_sweep_s27: views of a base modified in place afterwards
x = p(1, 2, 3)
y = x * 1
v = y.narrow(0, 0, 2)
y.mul_(2)
v.sum().backward(retain_graph=True)
show("s27_narrow_then_base_mul", xg=x.grad)
x.grad = None
v.backward(torch.ones(2, dtype=torch.float64))
show("s27_narrow_then_base_mul.root", xg=x.grad)
x = p(1, 2, 3)
w = p(10, 20, 30)
y = x * 1
v = y.t()
y.add_(w)
v.sum().backward()
show("s27_t_then_base_add_var", xg=x.grad, wg=w.grad)
x = p(1, 2, 3, 4)
y = x * 1
vv = y.view(2, 2).transpose(0, 1)
y.zero_()
vv.sum().backward()
show("s27_view_of_view_then_zero", xg=x.grad)
# hostile_sweep_s34: in place on a view of an untracked variable
for op in ["add_", "sub_", "mul_", "div_"]:
    x = p(1, 2, 3)
    z = torch.tensor([1.0, 2.0, 4.0], dtype=torch.float64)
    getattr(z.narrow(0, 1, 2), op)(x.narrow(0, 0, 2))
    ((z * z) + x).sum().backward()
    show(f"s34_untracked_view_{op[:-1]}", z=z, xg=x.grad)
# hostile_sweep_s34: a view of an untracked variable modified afterwards
x = p(1, 2, 3)
z = torch.zeros(3, dtype=torch.float64)
v = z.narrow(0, 0, 2)
vv = v.narrow(0, 0, 1)
z.add_(x)
((v * v).sum() + x.sum()).backward()
show("s34_untracked_then_base_add", xg=x.grad)
x.grad = None
(vv * 2).sum().backward()
show("s34_untracked_then_base_add.vv", xg=x.grad)
x.grad = None
v.mul_(2)
((z * z).sum()).backward()
show("s34_untracked_then_view_mul", z=z, xg=x.grad)
# hostile_sweep_s35: stale views whose base was dropped
x = p(1, 2, 3)
z = torch.zeros(3, dtype=torch.float64)
v = z.narrow(0, 0, 2)
vv = v.narrow(0, 1, 1)
z.add_(x)
del z
((v * v).sum() + x.sum()).backward()
show("s35_untracked_base_dropped", xg=x.grad)
x.grad = None
del v
vv.exp().sum().backward()
show("s35_untracked_base_dropped.vv", xg=x.grad)
for keep in [True, False]:
    x = p(1, 2, 3)
    y = x * 1
    v = y.narrow(0, 0, 2)
    vt = v.unsqueeze(0)
    y.mul_(2)
    if not keep:
        del y
    (v * v).sum().backward(retain_graph=True)
    g1 = x.grad.clone()
    x.grad = None
    (vt * vt).sum().backward()
    show(f"s35_tracked_base_kept_{keep}", xg_v=g1, xg_vt=x.grad)
x = p(1, 2, 3)
z = torch.zeros(3, dtype=torch.float64)
v = z.narrow(0, 0, 2)
z.add_(x)
v.backward(torch.ones(2, dtype=torch.float64))
show("s35_untracked_view_root", v_is_leaf=v.is_leaf, xg=x.grad)
