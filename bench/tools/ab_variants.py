"""What the interleaved A/B tools (compressed-read-ab.py,
compressed-write-ab.py) share: their common options, the settings of one
variant applied for its runs alone, and the CSV they write."""
from __future__ import annotations

import argparse
import contextlib
import csv
import os
from pathlib import Path
from typing import Any, Iterator


def parser(doc: str | None, work: str, files: str, repeat: int, variants: str) -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dir", default=work, help="where the test files are written")
    ap.add_argument("--out", default=".", help="where the CSV goes")
    ap.add_argument("--files", default=files, help="data:filter,...")
    ap.add_argument("--size", default="1GiB")
    ap.add_argument("--repeat", type=int, default=repeat)
    ap.add_argument("--variants", default=variants, help="settings separated by ';' (see above)")
    return ap


def parse_variant(text: str) -> dict[str, str]:
    """`default` (nothing set) or NAME=VALUE settings joined by `+`."""
    if text.strip() == "default":
        return {}
    env = {}
    for item in text.split("+"):
        name, _, value = item.partition("=")
        env[name] = value
    return env


def variants_of(text: str) -> list[str]:
    return [v.strip() for v in text.split(";") if v.strip()]


@contextlib.contextmanager
def applied(variant: str) -> Iterator[None]:
    """The variant's environment settings for the block, the former ones after."""
    env = parse_variant(variant)
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        yield
    finally:
        for k, old in saved.items():
            if old is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = old


def folders_and_files(args: argparse.Namespace) -> tuple[Path, Path, list[tuple[str, str]]]:
    """The work and output folders (made), and the (data, filter) pairs of --files."""
    work, out = Path(args.dir), Path(args.out)
    work.mkdir(parents=True, exist_ok=True)
    out.mkdir(parents=True, exist_ok=True)
    pairs = []
    for spec in args.files.split(","):
        kind, _, fname = spec.partition(":")
        pairs.append((kind, fname))
    return work, out, pairs


def write_csv(path: Path, rows: list[dict[str, Any]]) -> None:
    with open(path, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]) if rows else ["data"])
        w.writeheader()
        w.writerows(rows)
