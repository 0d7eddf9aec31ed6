"""Encode time by batch width: gzip+shuffle and lz4, traced writes, H5GDS_DECODE_BATCH_MIB varied."""
import os, sys, numpy as np, h5py, cupy, h5gds, hdf5plugin
from pathlib import Path
d = Path("/tmp/wd"); d.mkdir(exist_ok=True)
host = np.load(d / "field.npy")
dev = cupy.asarray(host)
rows = (1 << 20) // (1024 * 4)
os.environ["H5GDS_CODEC_DEBUG"] = "1"
for name, kw in [("gzip-shuffle", dict(compression="gzip", shuffle=True)), ("lz4", dict(**hdf5plugin.LZ4())),
                 ("bitshuffle-lz4", dict(**hdf5plugin.Bitshuffle(cname="lz4")))]:
    for mib in ["128", "132", "133", "136", "264", "256"]:
        os.environ["H5GDS_DECODE_BATCH_MIB"] = mib
        print(f"== {name} batch {mib} MiB", file=sys.stderr, flush=True)
        with h5py.File(d / "wave.h5", "w", driver="gds") as f:
            h5gds.create_dataset(f, "x", data=dev, chunks=(rows, 1024), **kw)
        if name != "gzip-shuffle" and mib == "133":
            break
