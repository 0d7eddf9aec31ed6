import os
import pathlib

import pytest


@pytest.fixture
def tmp_h5(tmp_path: pathlib.Path) -> pathlib.Path:
    return tmp_path / "t.h5"


def _gpu_reason() -> str | None:
    try:
        import h5gds
    except ImportError as exc:  # the package itself is broken: let the tests say so
        return f"h5gds not importable: {exc}"
    if os.environ.get("H5GDS_TEST_NO_GPU"):
        return "H5GDS_TEST_NO_GPU is set"
    if not h5gds.gpu_available():
        return "no CUDA GPU visible to CuPy or PyTorch"
    return None


def pytest_collection_modifyitems(config, items):  # noqa: ANN001
    reason = None
    checked = False
    for item in items:
        if "gpu" in item.keywords:
            if not checked:
                reason, checked = _gpu_reason(), True
            if reason:
                item.add_marker(pytest.mark.skip(reason=reason))
