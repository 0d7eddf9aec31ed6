"""What renaming a new checkpoint over the previous one costs, on the file
system of DIR: os.replace over a file of SIZE, against the same rename
while a descriptor of the old file is held (then closed afterwards, which
is when the blocks are freed). h5gds.save holds one (see _checkpoint._hold).

    python bench/tools/replace-cost.py [DIR] [--size 2GiB] [--repeat 3] [--csv FILE]
"""
import argparse
import csv
import os
import sys
import time


def make(path: str, nbytes: int) -> None:
    block = os.urandom(1 << 24)
    with open(path, "wb") as f:
        for _ in range(nbytes >> 24):
            f.write(block)
        f.flush()
        os.fsync(f.fileno())


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("dir", nargs="?", default="/tmp")
    p.add_argument("--size", default="2GiB")
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--csv", default="")
    a = p.parse_args()
    units = {"KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}
    num = a.size.rstrip("KMGiB")
    nbytes = int(float(num) * units.get(a.size[len(num):], 1))
    old, new = os.path.join(a.dir, "replace-old.bin"), os.path.join(a.dir, "replace-new.bin")
    rows = []
    for rep in range(a.repeat):
        for held in (False, True):
            make(old, nbytes)
            make(new, nbytes)
            os.sync()
            fd = os.open(old, os.O_RDONLY) if held else None
            t0 = time.perf_counter()
            os.replace(new, old)
            t1 = time.perf_counter()
            if fd is not None:
                os.close(fd)
            t2 = time.perf_counter()
            rows.append({"bench": "replace", "old_file_held": int(held), "bytes": nbytes, "repeat": rep,
                         "rename_s": round(t1 - t0, 4), "close_after_s": round(t2 - t1, 4)})
            print(rows[-1], flush=True)
    os.unlink(old)
    if a.csv:
        with open(a.csv, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(rows[0]))
            w.writeheader()
            w.writerows(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
