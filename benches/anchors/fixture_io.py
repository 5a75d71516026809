"""Writing the fixtures the oracle generators produce (shared by the gen_*.py scripts beside it)."""
import gzip
import math


def write_fixture(path, text):
    """Writes the fixture's JSON `text` to `path`: gzipped (level 9, mtime 0,
    so the bytes are reproducible) where `path` ends in .gz, as the
    checked-in fixture is, else plain."""
    data = text.encode()
    with open(path, "wb") as f:
        if path.endswith(".gz"):
            with gzip.GzipFile(filename="", mode="wb", compresslevel=9, fileobj=f, mtime=0) as g:
                g.write(data)
        else:
            f.write(data)


def fmt(x):
    """A float as the fixtures store it: itself, or "nan", "inf", "-inf"
    (JSON has no literals for them)."""
    if math.isnan(x):
        return "nan"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    return x


class LeftOut(Exception):
    """A drawn call that a fixture leaves out (each generator's docstring says
    which and why)."""


def outcome(call, max_result, skip_errors=(), left_out=None):
    """PyTorch's answer to `call()` as the hostile-argument fixtures store it:
    `{"results": [...]}` (each output's shape and values, row-major) or
    `{"error": the message's first line}`. Raises LeftOut for a result of more
    than `max_result` elements, for an error whose message holds one of
    `skip_errors`, and where `left_out(outputs)` says so; `call` may raise it
    too."""
    try:
        y = call()
        ys = y if isinstance(y, list) else [y]
        if any(t.numel() > max_result for t in ys) or (left_out is not None and left_out(ys)):
            raise LeftOut
        # Inside the try: PyTorch can return a tensor it cannot read back
        # (as_strided to a negative size), an error as any other.
        return {"results": [{"shape": list(t.shape),
                             "data": [fmt(float(v)) for v in t.double().flatten().tolist()]}
                            for t in ys]}
    except LeftOut:
        raise
    except Exception as e:  # noqa: BLE001 - PyTorch raises several types
        msg = str(e).split("\n")[0][:200]
        if any(k in msg for k in skip_errors):
            raise LeftOut from e
        return {"error": msg}


def write_cases(path, generator, cases, left_out):
    """Writes a hostile-argument fixture (`{"generator", "torch", "cases"}`)
    to `path` and prints how many cases it holds, how many are errors and
    how many draws were left out."""
    import json

    import torch

    doc = {"generator": generator, "torch": torch.__version__, "cases": cases}
    write_fixture(path, json.dumps(doc, allow_nan=False))
    print("%d cases (%d errors), %d left out -> %s"
          % (len(cases), sum("error" in c for c in cases), left_out, path))
