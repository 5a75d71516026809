# Session 62: run on the H100 of call 1 (PyTorch 2.11.0+cu130); its output is in
# 2026-12-05-h100-session62-c1-summary.txt (the lines after "pin probe rc 0").
# What PyTorch's pin_memory returns for views of every kind: sizes, strides,
# storage offset, storage bytes, values equal.
import torch
b = torch.arange(60, dtype=torch.float32).reshape(3, 4, 5)
cases = {
    "contiguous": b,
    "transposed": b.transpose(0, 2),
    "step2": b[:, :, ::2],
    "narrow_offset": b[1:, 1:3],
    "expanded": torch.arange(5.0).expand(3, 5),
    "channels_last": torch.arange(120.0).reshape(2, 3, 4, 5).contiguous(memory_format=torch.channels_last),
    "cl_sliced": torch.arange(120.0).reshape(2, 3, 4, 5).contiguous(memory_format=torch.channels_last)[:, :, 1:3],
    "empty_strided": b[:, :0],
    "zero_d": torch.tensor(3.0),
    "neg_step_like_flip_view": b.transpose(1, 2)[:, ::3],
}
for k, t in cases.items():
    try:
        p = t.pin_memory()
        print(k, "in", tuple(t.shape), t.stride(), t.storage_offset(), "->", tuple(p.shape), p.stride(), p.storage_offset(), p.untyped_storage().nbytes(), bool(torch.equal(p, t)), p.is_pinned())
    except Exception as e:
        print(k, "ERROR", type(e).__name__, str(e).splitlines()[0][:200])
