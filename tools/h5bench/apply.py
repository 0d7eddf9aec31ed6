#!/usr/bin/env python3
"""Applies h5gds's edits to a copy of h5bench's sources (hpc-io/h5bench,
h5bench_patterns/h5bench_write.c and h5bench_read.c): each edit is an exact
anchor in their code and what goes before, after or in place of it; an anchor
that is missing or found twice stops with an error (another h5bench version:
check the anchors). The calls go to tools/h5bench/h5bench_gds.c.
    apply.py SRC_DIR     (edits SRC_DIR/h5bench_patterns/*.c in place; idempotent)
"""
import pathlib
import sys

MARK = "/* h5gds */"

EDITS = {
    "h5bench_write.c": [
        ('#include "../commons/async_adaptor.h"\n', "after", '#include "h5bench_gds.h" ' + MARK + "\n"),
        ("            H5Pset_fapl_mpio(fapl, comm, info);\n", "replace",
         "            h5bench_gds_set_fapl(fapl, comm, info); " + MARK + "\n"),
        ("    void *data = _prepare_data(params, &filespace, &memspace, &data_preparation_time, &data_size);\n",
         "after", "    h5bench_gds_prepare_write(&params, data); " + MARK + "\n"),
        ("    data_free(pattern, data);\n", "before", "    h5bench_gds_release_write(&params, data); " + MARK + "\n"),
    ],
    "h5bench_read.c": [
        ('#include "../commons/async_adaptor.h"\n', "after", '#include "h5bench_gds.h" ' + MARK + "\n"),
        ("        H5Pset_fapl_mpio(*fapl, MPI_COMM_WORLD, MPI_INFO_NULL);\n", "replace",
         "        h5bench_gds_set_fapl(*fapl, MPI_COMM_WORLD, MPI_INFO_NULL); " + MARK + "\n"),
        ("    BUF_STRUCT = prepare_contig_memory_multi_dim(params.dim_1, params.dim_2, params.dim_3);\n", "after",
         "    h5bench_gds_prepare_read(&params, BUF_STRUCT); " + MARK + "\n"),
        ("    free_contig_memory(BUF_STRUCT);\n", "before",
         "    h5bench_gds_finish_read(&params, BUF_STRUCT); " + MARK + "\n"),
    ],
}


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    src = pathlib.Path(sys.argv[1]) / "h5bench_patterns"
    for name, edits in EDITS.items():
        path = src / name
        text = path.read_text()
        if MARK in text:
            print(f"apply: {path} already edited")
            continue
        for anchor, where, code in edits:
            n = text.count(anchor)
            if n != 1:
                sys.exit(f"apply: {path}: anchor found {n} times (expected once): {anchor.strip()!r}")
            new = {"after": anchor + code, "before": code + anchor, "replace": code}[where]
            text = text.replace(anchor, new)
        path.write_text(text)
        print(f"apply: {path}: {len(edits)} edits")


if __name__ == "__main__":
    main()
