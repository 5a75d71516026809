"""Packs a device call's outputs into at most 7 pieces of 15 MiB (the device tool brings back 8 files, 64 MiB):
summary.txt beside them, everything else (held-out traces recompressed with xz, logs, replay and torch results) in
one tar split into pack.tar.NN. If the whole is too large, the *.expandable traces keep only their header and stats
(events emptied; named *.expandable.stats.json.xz)."""
import glob, gzip, io, json, lzma, os, shutil, sys, tarfile
from concurrent.futures import ProcessPoolExecutor
O, OUT = sys.argv[1], sys.argv[2]
LIMIT = 7 * 15 * 2**20 - 2**20
def recompress(f, stats_only):
    raw = gzip.open(f).read(); n = os.path.basename(f)[:-3]
    if stats_only and ".expandable." in n:
        d = json.loads(raw); d["events"] = []; raw = json.dumps(d).encode(); n = n.replace(".json", ".stats.json")
    return n, lzma.compress(raw, preset=3)
def build(stats_only):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        def add(name, data):
            ti = tarfile.TarInfo(name); ti.size = len(data); tar.addfile(ti, io.BytesIO(data))
        for f in sorted(glob.glob(os.path.join(O, "*"))):
            if os.path.isfile(f):
                add(os.path.basename(f) + ".xz", lzma.compress(open(f, "rb").read(), preset=6))
        for f in sorted(glob.glob(os.path.join(O, "held_out6", "logs", "*"))):
            add("held_out6/logs/" + os.path.basename(f), open(f, "rb").read())
        files = sorted(glob.glob(os.path.join(O, "held_out6", "*.json.gz")))
        with ProcessPoolExecutor(max_workers=12) as ex:
            for n, blob in ex.map(recompress, files, [stats_only] * len(files)):
                add("held_out6/" + n + ".xz", blob)
    return buf.getvalue()
if __name__ == '__main__':
  data = build(False)
  if len(data) > LIMIT:
    data = build(True)
  print(f"pack {len(data) >> 20} MiB")
  shutil.copy(os.path.join(O, "summary.txt"), os.path.join(OUT, "summary.txt"))
  for i in range(0, len(data), 15 * 2**20):
    open(os.path.join(OUT, f"pack.tar.{i // (15 * 2**20):02d}"), "wb").write(data[i:i + 15 * 2**20])
