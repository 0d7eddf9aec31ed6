"""What several test files share (not a test file itself): whether nvCOMP is
installed for the GPU decode, hdf5plugin where installed, and equality of
checkpoint states."""
from __future__ import annotations

import importlib.util
import os
import re
from typing import Any

import numpy as np


def nvcomp_missing() -> str | None:
    """Why nvCOMP cannot be found (None: it can): H5GDS_NVCOMP_LIB, or the
    nvidia-libnvcomp-cu13 wheel's folder."""
    if os.environ.get("H5GDS_NVCOMP_LIB"):
        return None
    try:  # find_spec of a submodule raises when the parent package is absent
        if importlib.util.find_spec("nvidia.nvcomp") is not None:
            return None
        if importlib.util.find_spec("nvidia") is not None:
            import nvidia  # noqa: F401
            for p in getattr(nvidia, "__path__", []):
                if os.path.isdir(os.path.join(p, "nvcomp")):
                    return None
    except ImportError:
        pass
    return "nvCOMP not installed (pip install nvidia-libnvcomp-cu13, or set H5GDS_NVCOMP_LIB)"


def hdf5plugin_or_none() -> Any:
    """The hdf5plugin module, or None where it is not installed (tests of
    plugin filters then skip or leave those filters out)."""
    try:
        import hdf5plugin
        return hdf5plugin
    except ImportError:
        return None


def cases_scale() -> int:
    """How many times the random tests' default number of cases to draw:
    H5GDS_TEST_CASES_SCALE (1 unless set; 10 for a longer hunt)."""
    return max(1, int(os.environ.get("H5GDS_TEST_CASES_SCALE", "1") or 1))


def states_equal(a: Any, b: Any) -> bool:
    """Nested dicts, lists and tuples of numpy arrays and plain values: the
    same keys in the same order, types, dtypes, shapes and values."""
    if isinstance(a, dict):
        return isinstance(b, dict) and list(a) == list(b) and all(states_equal(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(states_equal(x, y) for x, y in zip(a, b))
    if isinstance(a, np.ndarray):
        return isinstance(b, np.ndarray) and a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a, b)
    return type(a) is type(b) and a == b


# The GPU's findings on a chunk's sizes (gds_codec_error_text; ERANGE in
# gds_codec_error_errno): HDF5 would pass such a chunk on with bytes it
# never decoded (or cut), so they stay errors where HDF5's own filters read
# the chunk.
SIZE_FINDING = re.compile(r"decoded to \d+ bytes, not|decoded bytes, not the size|stored size \d+ differs|"
                          r"too small for the filter's framing|output buffer too small")
