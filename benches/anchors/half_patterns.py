"""f16/bf16 bit patterns for the half-precision generators (gen_gelu_half_s54d.py, gen_oracle_s55.py):
tensors to their patterns, hex strings, NaNs made canonical, the FNV-1a hash the tests recompute, and an op over
all 65,536 patterns through PyTorch's vectorised and scalar loops."""
import torch

DT = {"f16": torch.float16, "bf16": torch.bfloat16}
NAN = {"f16": 0x7E00, "bf16": 0x7FC0}


def bits(t):
    return (t.contiguous().view(torch.int16).to(torch.int32) & 0xFFFF).reshape(-1).tolist()


def hexs(v):
    return "".join("%04x" % b for b in v)


def canon(dt, t):
    b = bits(t)
    nan = torch.isnan(t.float()).reshape(-1).tolist()
    return [NAN[dt] if n else x for x, n in zip(b, nan)]


def fnv(v):
    h = 0xCBF29CE484222325
    for b in v:
        for byte in (b & 0xFF, b >> 8):
            h ^= byte
            h = (h * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return "%016x" % h


def every_pattern(dt, op):
    """`op` of every pattern of `dt`, as one contiguous tensor and as x[::2] of a doubled storage (every element
    the scalar loop's): the record {"contiguous", "stepped": FNV-1a of each result (NaNs canonical), "differ":
    [pattern, stepped, contiguous] where they differ}, and the differing patterns."""
    pats = torch.arange(65536, dtype=torch.int32).to(torch.int16).view(DT[dt])
    contig = op(pats)
    wide = torch.empty(2 * 65536, dtype=DT[dt])
    wide[::2] = pats
    stepped = op(wide[::2])
    c, s = canon(dt, contig), canon(dt, stepped)
    differ = [i for i in range(65536) if c[i] != s[i]]
    record = {"contiguous": fnv(c), "stepped": fnv(s), "differ": [[i, s[i], c[i]] for i in differ]}
    return record, differ
