#!/usr/bin/env python3
"""The graph of the library's C source files: a file -> the files whose
functions it calls (or names: a driver's class table names its callbacks).

Layers, lowest first: src/cuda < src/engine < src/codec < src/vfd <
src/mpi, src/mpio < python/native. A file may call files of its own layer
and of lower ones; the graph must have no cycle.

  tools/source_graph.py [--root DIR] [--edges]

Prints the cycles (strongly connected components of more than one file)
and the calls up a layer, then a summary; exits 1 when there is any.
--edges also prints every edge with the functions it stands for.
Standard library only: the C is read with a small scanner (comments,
strings and preprocessor lines removed; a definition is a name, its
parameter list and a body at file scope), which is enough for this code.
"""
import argparse
import os
import re
import sys

LAYERS = [
    ("src/cuda", 0),
    ("src/engine", 1),
    ("src/codec", 2),
    ("src/vfd", 3),
    ("src/mpi", 4),
    ("src/mpio", 4),
    ("python/native", 5),
]

KEYWORDS = {
    "if", "for", "while", "switch", "return", "sizeof", "do", "else", "case", "goto", "_Alignof",
    "_Static_assert", "__attribute__", "typeof", "__typeof__", "defined", "_Generic", "alignof",
}

IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")

# HDF5's own functions that the preload library (src/mpio/gds_mpio_preload.c)
# replaces in an unmodified program: a call to them elsewhere is a call to
# HDF5, not to that file.
INTERPOSED = {"H5Dread", "H5Dwrite", "H5Pset_fapl_mpio", "H5Pget_fapl_mpio"}


def names_used(code):
    """Identifiers of `code` that are not members (a.b, a->b)."""
    out = set()
    for m in IDENT.finditer(code):
        before = code[max(0, m.start() - 64) : m.start()].rstrip()
        if before.endswith(".") or before.endswith("->"):
            continue
        out.add(m.group(0))
    return out


def strip_c(text):
    """The text without comments, string and character literals and
    preprocessor lines (each replaced by spaces, so the braces stay)."""
    out = []
    i, n = 0, len(text)
    line_start = True
    while i < n:
        c = text[i]
        if line_start and c == "#":
            # a preprocessor line, with its continuations
            while i < n and text[i] != "\n":
                if text[i] == "\\" and i + 1 < n and text[i + 1] == "\n":
                    i += 2
                    continue
                if text.startswith("/*", i):
                    end = text.find("*/", i + 2)
                    i = n if end < 0 else end + 2
                    continue
                i += 1
            continue
        if text.startswith("//", i):
            while i < n and text[i] != "\n":
                i += 1
            continue
        if text.startswith("/*", i):
            end = text.find("*/", i + 2)
            end = n if end < 0 else end + 2
            out.append("\n" * text.count("\n", i, end) or " ")
            i = end
            continue
        if c in "\"'":
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            out.append(" ")
            i = j + 1
            line_start = False
            continue
        out.append(c)
        if c == "\n":
            line_start = True
        elif not c.isspace():
            line_start = False
        i += 1
    return "".join(out)


def scan(text):
    """(external definitions, static definitions, names used) of one file."""
    code = strip_c(text)
    external, static, used = set(), set(), set()
    depth = 0
    head_start = 0  # where the current file-scope declaration began
    i, n = 0, len(code)
    while i < n:
        c = code[i]
        if c == "{":
            if depth == 0:
                head = code[head_start:i]
                m = re.search(r"([A-Za-z_][A-Za-z0-9_]*)\s*\((.*)\)\s*(__attribute__\s*\(\(.*\)\)\s*)?$", head, re.S)
                is_function = m and not re.search(r"=", head[: m.start()]) and m.group(1) not in KEYWORDS
                if is_function and not re.search(r"\b(struct|union|enum)\s*$", head[: m.start(1)]):
                    (static if re.search(r"\bstatic\b", head[: m.start()]) else external).add(m.group(1))
                    # names in the head after the name (parameter types) are not calls
                else:
                    # an initializer or a type: names in it count as uses
                    used |= names_used(head)
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0:
                head_start = i + 1
        elif c == ";" and depth == 0:
            used |= names_used(code[head_start:i])
            head_start = i + 1
        elif depth > 0 and (c.isalpha() or c == "_") and not (code[i - 1].isalnum() or code[i - 1] == "_"):
            m = IDENT.match(code, i)
            before = code[max(0, i - 64) : i].rstrip()
            if not (before.endswith(".") or before.endswith("->")):
                used.add(m.group(0))
            i = m.end()
            continue
        i += 1
    return external, static, used


def layer_of(rel):
    for prefix, level in LAYERS:
        if rel.startswith(prefix + "/"):
            return prefix, level
    return None, None


def build(root):
    files = {}
    for prefix, _ in LAYERS:
        d = os.path.join(root, prefix)
        if not os.path.isdir(d):
            continue
        for name in sorted(os.listdir(d)):
            if name.endswith(".c"):
                rel = prefix + "/" + name
                with open(os.path.join(root, rel), encoding="utf-8", errors="replace") as f:
                    files[rel] = scan(f.read())
    defined = {}
    for rel, (external, _, _) in files.items():
        for name in external - INTERPOSED:
            defined.setdefault(name, []).append(rel)
    edges = {rel: {} for rel in files}
    for rel, (external, static, used) in files.items():
        for name in used - external - static:
            for target in defined.get(name, ()):
                if target != rel:
                    edges[rel].setdefault(target, set()).add(name)
    return files, edges, defined


def cycles(edges):
    """Strongly connected components of more than one file (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(edges[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--root", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    ap.add_argument("--edges", action="store_true", help="print every edge and the functions behind it")
    args = ap.parse_args()
    files, edges, _ = build(args.root)
    if not files:
        print("source_graph: no C sources under %s" % args.root, file=sys.stderr)
        return 2
    if args.edges:
        for src in sorted(edges):
            for dst in sorted(edges[src]):
                print("%s -> %s: %s" % (src, dst, ", ".join(sorted(edges[src][dst]))))
    found = cycles(edges)
    for comp in found:
        print("cycle of %d files: %s" % (len(comp), " ".join(comp)))
        members = set(comp)
        for src in comp:
            for dst in sorted(edges[src]):
                if dst in members:
                    print("  %s -> %s: %s" % (src, dst, ", ".join(sorted(edges[src][dst]))))
    upward = []
    for src in sorted(edges):
        for dst in sorted(edges[src]):
            if layer_of(dst)[1] > layer_of(src)[1]:
                upward.append((src, dst))
                print("call up a layer: %s -> %s: %s" % (src, dst, ", ".join(sorted(edges[src][dst]))))
    nedges = sum(len(v) for v in edges.values())
    print("source_graph: %d files, %d edges, %d cycles, %d calls up a layer" % (len(files), nedges, len(found),
                                                                                 len(upward)))
    return 1 if found or upward else 0


if __name__ == "__main__":
    sys.exit(main())
