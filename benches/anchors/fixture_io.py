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
