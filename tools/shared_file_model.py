#!/usr/bin/env python3
"""A model of one shared HDF5 file written by P GPU ranks on a striped parallel
file system (Lustre-like), for docs/shared-file-mode.md ("64+ ranks").

It walks the file stripe by stripe (every stripe of the real layout, no
sampling) and counts, per object storage target (OST): bytes, write RPCs
(one per contiguous run of one rank inside a stripe), extent-lock handovers
(a stripe written by w distinct clients costs at least w - 1 lock
revocations, which serialise on that stripe), and file-system blocks (4 KiB)
shared by two ranks (a read-modify-write each under O_DIRECT). Time is the
slowest resource: an OST (bytes / bandwidth + RPCs / service threads x RPC
cost + lock handovers x lock cost), or a GPU's share of its node's network
link (bytes, plus its own RPCs / its I/O threads); aggregation adds its
exchange before the write (not overlapped: conservative). Two strategies:

  independent  every rank writes its own pieces (gds_mpio today: one
               engine per rank, O_DIRECT/cuFile on its own handle)
  aggregated   two-phase I/O on the GPUs: the pieces first move GPU to GPU
               (NVLink inside a node, GPUDirect RDMA between nodes) to
               aggregators that own stripe-aligned file domains, which then
               write whole stripes: one writer per stripe, no lock
               handovers, no shared blocks. `agg=ranks`: every GPU owns a
               contiguous stripe-aligned domain of T/P bytes; `agg=osts`: one
               aggregator per OST (stripe k to aggregator k mod OSTs), the
               rule of ROMIO's Lustre driver.

The layouts are periodic runs ("pieces") of one rank: rank r owns pieces
r, r+P, r+2P, ... of `piece` bytes, starting `offset` bytes into a stripe
(the dataset's address modulo the stripe size). A 1-D slab is piece = the
rank's size; a 2-D block decomposition of rows is piece = its row length;
"rank boundaries every 4099 elements" of 1-byte elements is piece = 4099.

Every parameter is an assumption to change on the command line (defaults:
a Lustre file system with NVMe OSTs and 4-GPU nodes with 4 x 25 GB/s NICs);
the numbers are a model, not measurements. `--check` compares the per-stripe
counting with a brute-force enumeration of every piece on small cases.

    shared_file_model.py [--ranks 64,256,1024] [--size-per-rank 2GiB] [--stripe 16MiB] ...
"""
import argparse
import math

from cli_common import ArgumentParser, float_arg, int_arg, int_list_arg, size_arg

KiB, MiB, GiB = 1 << 10, 1 << 20, 1 << 30


def stripe_counts(nranks, per_rank, piece, offset, stripe, block=4096):
    """Yields, for each stripe k the file's raw data touches: (k, bytes, runs,
    distinct writers, shared blocks). Pieces are periodic: piece j (bytes
    [j*piece, (j+1)*piece) of the data, which starts `offset` bytes into
    stripe 0) belongs to rank j mod nranks."""
    total = nranks * per_rank
    end_addr = offset + total
    nstripes = (end_addr + stripe - 1) // stripe
    for k in range(nstripes):
        lo = max(k * stripe, offset) - offset
        hi = min((k + 1) * stripe, end_addr) - offset
        if hi <= lo:
            continue
        first, last = lo // piece, (hi - 1) // piece
        runs = last - first + 1
        writers = min(runs, nranks)
        # piece boundaries strictly inside this stripe (starts of pieces first+1..last)
        # that are not block aligned: the block holding one is written by two ranks
        shared = unaligned_starts(first + 1, last, piece, offset, block) if nranks > 1 else 0
        yield k, hi - lo, runs, writers, shared


def unaligned_starts(j_lo, j_hi, piece, offset, block):
    """How many j in [j_lo, j_hi] have (offset + j * piece) % block != 0."""
    n = j_hi - j_lo + 1
    if n <= 0:
        return 0
    g = math.gcd(piece, block)
    if offset % g:
        return n  # never aligned
    period = block // g
    # the j with offset + j*piece = 0 (mod block): j = j0 (mod period)
    j0 = (-(offset // g) * pow(piece // g, -1, period)) % period if period > 1 else 0
    first = j_lo + ((j0 - j_lo) % period)
    aligned = 0 if first > j_hi else (j_hi - first) // period + 1
    return n - aligned


def brute_force(nranks, per_rank, piece, offset, stripe, block=4096):
    """The same counts by enumerating every byte range (small cases only)."""
    total = nranks * per_rank
    stats = {}
    npieces = (total + piece - 1) // piece
    for j in range(npieces):
        a, b = offset + j * piece, offset + min((j + 1) * piece, total)
        rank = j % nranks
        k = a // stripe
        while a < b:
            e = min(b, (k + 1) * stripe)
            s = stats.setdefault(k, [0, 0, set(), 0])
            s[0] += e - a
            s[1] += 1
            s[2].add(rank)
            a, k = e, k + 1
        start = offset + j * piece
        if j > 0 and start % block and start < offset + total:
            stats[start // stripe][3] += 1
    return {k: (v[0], v[1], min(len(v[2]), nranks), v[3]) for k, v in stats.items()}


def model(a, nranks, piece, offset, strategy):
    per_rank, stripe = a.size_per_rank, a.stripe
    total = nranks * per_rank
    nodes = max(1, nranks // a.gpus_per_node)
    gpu_link = a.nic_per_node / min(nranks, a.gpus_per_node)  # a GPU's share of its node's NIC
    ost_bytes = [0] * a.osts
    ost_rpcs = [0] * a.osts
    ost_locks = [0] * a.osts
    shared_total = locks_total = 0
    exchange = 0.0
    if strategy == "independent":
        for k, nbytes, runs, writers, shared in stripe_counts(nranks, per_rank, piece, offset, stripe):
            o = k % a.osts
            ost_bytes[o] += nbytes
            ost_rpcs[o] += runs + 2 * shared  # a shared block: read + write of it once more
            ost_locks[o] += writers - 1 + shared
            shared_total += shared
            locks_total += writers - 1 + shared
        runs_per_rank = math.ceil(per_rank / piece) + (1 if offset % piece else 0)
        client = per_rank / gpu_link + runs_per_rank * a.rpc_s / a.client_threads
    else:
        # aggregators own whole stripes: one writer each, full-stripe RPCs
        naggs = nranks if strategy == "agg=ranks" else min(nranks, a.osts)
        for k, nbytes, runs, writers, shared in stripe_counts(nranks, per_rank, piece, offset, stripe):
            o = k % a.osts
            ost_bytes[o] += nbytes
            ost_rpcs[o] += 1
        # bytes each rank must send to another GPU: its pieces outside the domain it owns
        if strategy == "agg=ranks":
            domain = math.ceil(total / nranks / stripe) * stripe
            moved = sum(moved_bytes(r, nranks, per_rank, piece, offset, domain) for r in range(min(nranks, 64)))
            moved_per_rank = moved / min(nranks, 64)
            recv_per_agg = moved_per_rank  # symmetric
        else:  # a rank keeps at most 1/naggs of its bytes: counted as all sent
            moved_per_rank = per_rank
            recv_per_agg = total / naggs
        # inside a node 1/nodes of the traffic stays on NVLink (much faster): counted on the NIC only
        off_node = 1 - 1 / nodes if nodes > 1 else 0.0
        exchange = max(moved_per_rank, recv_per_agg) * off_node / gpu_link + \
            max(moved_per_rank, recv_per_agg) * (1 - off_node) / a.nvlink
        agg_bytes = total / naggs
        client = agg_bytes / gpu_link + math.ceil(agg_bytes / stripe) * a.rpc_s / a.client_threads
    ost_time = max(ost_bytes[o] / a.ost_bw + ost_rpcs[o] * a.rpc_s / a.ost_threads + ost_locks[o] * a.lock_s
                   for o in range(a.osts))
    # two phases, not overlapped (conservative for aggregation): exchange, then write
    t = exchange + max(ost_time, client)
    ceiling = min(a.osts * a.ost_bw, nodes * a.nic_per_node)
    return {"seconds": t, "gbps": total / t / 1e9, "of_ceiling": total / t / ceiling, "ost_s": ost_time,
            "client_s": client, "exchange_s": exchange, "locks": locks_total, "shared_blocks": shared_total,
            "ceiling_gbps": ceiling / 1e9}


def moved_bytes(rank, nranks, per_rank, piece, offset, domain):
    """Bytes of `rank`'s pieces outside its own domain [rank*domain, (rank+1)*domain)
    of the file (addresses from the stripe-aligned start of stripe 0)."""
    total = nranks * per_rank
    lo_d, hi_d = rank * domain, (rank + 1) * domain
    inside = 0
    npieces_rank = math.ceil(per_rank / piece) if piece < per_rank else 1
    if piece >= per_rank:  # one slab
        a = offset + rank * per_rank
        b = a + per_rank
        inside = max(0, min(b, hi_d) - max(a, lo_d))
        return per_rank - inside
    # periodic pieces: pieces of this rank whose addresses fall in the domain
    # (counted exactly over the pieces in that address range only)
    j0 = max(0, (lo_d - offset) // piece - 1)
    j1 = min(math.ceil(total / piece), (hi_d - offset) // piece + 2)
    j = j0 + ((rank - j0) % nranks)
    while j < j1:
        a = offset + j * piece
        b = offset + min((j + 1) * piece, total)
        inside += max(0, min(b, hi_d) - max(a, lo_d))
        j += nranks
    return per_rank - inside if npieces_rank else 0


def check():
    cases = [(4, 64 * KiB, 4099, 0, 16 * KiB), (8, 48 * KiB, 32 * KiB, 2048, 64 * KiB),
             (3, 100 * KiB, 100 * KiB, 0, 32 * KiB), (5, 20 * KiB, 4096, 4096, 8 * KiB), (7, 9000, 9000, 123, 4096)]
    for c in cases:
        fast = {k: (b, r, w, s) for k, b, r, w, s in stripe_counts(*c)}
        slow = brute_force(*c)
        assert fast == slow, (c, [(k, fast.get(k), slow.get(k)) for k in sorted(set(fast) | set(slow))
                                  if fast.get(k) != slow.get(k)][:5])
    print(f"check: per-stripe counting equals brute-force enumeration on {len(cases)} layouts")


def main(argv=None):
    p = ArgumentParser(prog="shared_file_model", description=__doc__,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--ranks", default="64,256,1024", type=int_list_arg(1))
    p.add_argument("--size-per-rank", type=size_arg, default=2 * GiB,
                   help="sizes as in the gds configuration: 4096, 64KiB, 8MiB, 1GiB, 1G, 500MB")
    p.add_argument("--stripe", type=size_arg, default=16 * MiB)
    p.add_argument("--osts", type=int_arg(1), default=64)
    p.add_argument("--ost-bw", type=float_arg(0), default=10e9, help="bytes/s per OST (NVMe)")
    p.add_argument("--ost-threads", type=int_arg(1), default=16, help="RPCs an OST serves at once")
    p.add_argument("--rpc-s", type=float_arg(0, strict=False), default=30e-6, help="cost of one write RPC")
    p.add_argument("--lock-s", type=float_arg(0, strict=False), default=1e-3,
                   help="one extent-lock handover (revoke + re-grant)")
    p.add_argument("--gpus-per-node", type=int_arg(1), default=4)
    p.add_argument("--nic-per-node", type=float_arg(0), default=100e9, help="bytes/s (4 x 25 GB/s)")
    p.add_argument("--nvlink", type=float_arg(0), default=300e9, help="bytes/s GPU to GPU inside a node")
    p.add_argument("--client-threads", type=int_arg(1), default=16, help="I/O threads per rank (the engine's)")
    p.add_argument("--check", action="store_true")
    a = p.parse_args(argv)
    if a.check:
        check()
        return
    layouts = [("1-D slabs, dataset stripe-aligned", None, 0),
               ("1-D slabs, dataset at +2 KiB (no H5Pset_alignment)", None, 2 * KiB),
               ("2-D blocks, rows of 32 KiB per rank", 32 * KiB, 0),
               ("rank boundaries every 4099 B (1-B elements)", 4099, 0)]
    print(f"size per rank {a.size_per_rank / GiB:g} GiB, stripe {a.stripe / MiB:g} MiB over {a.osts} OSTs of "
          f"{a.ost_bw / 1e9:g} GB/s, {a.gpus_per_node} GPUs and {a.nic_per_node / 1e9:g} GB/s per node, "
          f"RPC {a.rpc_s * 1e6:g} us, lock handover {a.lock_s * 1e3:g} ms\n")
    print("| ranks | layout | strategy | GB/s | of ceiling | time s (exchange + max(OSTs, clients)) | lock handovers "
          "| shared 4K blocks |")
    print("|---|---|---|---|---|---|---|---|")
    for n in a.ranks:
        for name, piece, offset in layouts:
            for strategy in ("independent", "agg=ranks", "agg=osts"):
                r = model(a, n, piece or a.size_per_rank, offset, strategy)
                print(f"| {n} | {name} | {strategy} | {r['gbps']:.0f} | {100 * r['of_ceiling']:.0f}% "
                      f"(of {r['ceiling_gbps']:.0f}) | {r['seconds']:.2f} ({r['exchange_s']:.2f} + max({r['ost_s']:.2f}, "
                      f"{r['client_s']:.2f})) | {r['locks']} | {r['shared_blocks']} |")


if __name__ == "__main__":
    main()
