"""Device arrays (CuPy and PyTorch) through read/write/create_dataset and
the loader. Marker `gpu`: skipped with the reason when no GPU is usable."""
import warnings

import h5py
import numpy as np
import pytest

import h5gds

pytestmark = pytest.mark.gpu


def _modules():
    mods = []
    try:
        import cupy  # noqa: F401
        mods.append("cupy")
    except ImportError:
        pass
    try:
        import torch
        if torch.cuda.is_available():
            mods.append("torch")
    except ImportError:
        pass
    return mods


def to_host(a):
    if type(a).__module__.startswith("cupy"):
        return a.get()
    if type(a).__module__.startswith("torch"):
        return a.cpu().numpy()
    return np.asarray(a)


def device_array(module, host):
    if module == "cupy":
        import cupy
        return cupy.asarray(host)
    import torch
    return torch.from_numpy(host).cuda()


@pytest.fixture(params=["cupy", "torch"])
def module(request):
    if request.param not in _modules():
        pytest.skip(f"{request.param} with CUDA is not available")
    return request.param


@pytest.mark.parametrize("chunks", [None, (16, 32, 8)])
def test_device_round_trip(tmp_h5, module, chunks):
    host = np.random.default_rng(0).random((64, 96, 24)).astype("f4")
    with h5py.File(tmp_h5, "w", driver="gds") as f:
        d = h5gds.create_dataset(f, "x", data=device_array(module, host), chunks=chunks)
        got = h5gds.read(d, like=module)
        assert type(got).__module__.split(".")[0] == module
        np.testing.assert_array_equal(to_host(got), host)
        assert h5gds.last_route() == "passthrough"
        for sel in [(3,), (slice(2, 50, 3), Ellipsis, 5), (Ellipsis, slice(0, 24, 7))]:
            np.testing.assert_array_equal(to_host(h5gds.read(d, sel, like=module)), host[sel])
        new = np.full((10, 96, 24), 5, "f4")
        h5gds.write(d, device_array(module, new), (slice(0, 20, 2),))
        host[0:20:2] = new
    with h5py.File(tmp_h5, "r") as f:
        np.testing.assert_array_equal(f["x"][()], host)


def test_non_contiguous_device_arrays(tmp_h5, module):
    host = np.arange(200, dtype="f8").reshape(10, 20)
    with h5py.File(tmp_h5, "w", driver="gds") as f:
        d = f.create_dataset("x", shape=(10, 10), dtype="f8")
        dev = device_array(module, host)
        h5gds.write(d, dev[:, ::2])  # made contiguous on the device
        np.testing.assert_array_equal(d[()], host[:, ::2])
        with pytest.raises(ValueError, match="contiguous"):
            h5gds.read(d, out=dev[:, ::2])


def test_out_errors_on_device(tmp_h5, module):
    with h5py.File(tmp_h5, "w", driver="gds") as f:
        d = h5gds.create_dataset(f, "x", data=np.arange(12, dtype="f4"))
        with pytest.raises(TypeError):
            h5gds.read(d, out=device_array(module, np.zeros(12, "f8")))
        with pytest.raises(ValueError):
            h5gds.read(d, out=device_array(module, np.zeros(11, "f4")))
        with pytest.raises(IndexError):
            h5gds.read(d, (12,), like=module)


def test_not_gds_file_warns_once_and_works(tmp_h5, module):
    import h5gds._io as io
    io._warned_not_gds = False
    with h5py.File(tmp_h5, "w") as f:
        d = f.create_dataset("x", data=np.arange(8, dtype="i4"))
        with pytest.warns(h5gds.NotGdsWarning, match="once"):
            got = h5gds.read(d, like=module)
        np.testing.assert_array_equal(to_host(got), np.arange(8))
        assert h5gds.last_route() == "host-staged"
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            h5gds.write(d, device_array(module, np.zeros(8, "i4")))
        np.testing.assert_array_equal(d[()], np.zeros(8))


def test_cuda_array_interface_and_dlpack(tmp_h5):
    cupy = pytest.importorskip("cupy")

    class CAI:
        def __init__(self, a):
            self.a = a
            self.__cuda_array_interface__ = a.__cuda_array_interface__

    with h5py.File(tmp_h5, "w", driver="gds") as f:
        d = f.create_dataset("x", shape=(50,), dtype="f4")
        src = cupy.arange(50, dtype="f4")
        h5gds.write(d, CAI(src))
        out = cupy.zeros(50, "f4")
        h5gds.read(d, out=CAI(out))
        assert bool((out == src).all())
        h5gds.write(d, cupy.from_dlpack(src * 2))
        np.testing.assert_array_equal(d[()], np.arange(50) * 2)


def test_memory_from_a_stream_ordered_pool(tmp_h5):
    """Device memory from cudaMallocAsync (CuPy's MemoryAsyncPool, PyTorch's
    cudaMallocAsync backend) names no CUDA context: writes and reads into
    it use its device's context (they failed with 'device buffer without a
    CUDA context')."""
    cupy = pytest.importorskip("cupy")
    pool = cupy.cuda.MemoryAsyncPool()
    host = np.random.default_rng(7).random((256, 1024), dtype=np.float32)
    with cupy.cuda.using_allocator(pool.malloc):
        src = cupy.asarray(host)
        out = cupy.zeros_like(src)
        out_part = cupy.zeros((100, 1024), dtype=np.float32)
    with h5py.File(tmp_h5, "w", driver="gds") as f:
        d = f.create_dataset("x", shape=host.shape, dtype="f4")
        h5gds.write(d, src)
        f.create_dataset("z", data=host, chunks=(64, 1024), compression="gzip", shuffle=True)
    with h5py.File(tmp_h5, "r", driver="gds") as f:
        np.testing.assert_array_equal(f["x"][()], host)
        h5gds.read(f["x"], out=out)
        np.testing.assert_array_equal(out.get(), host)
        h5gds.read(f["z"], np.s_[50:150], out=out_part)  # filtered: GPU decode where nvCOMP is, else HDF5's
        np.testing.assert_array_equal(out_part.get(), host[50:150])


def test_stream_ordering_cupy(tmp_h5):
    cupy = pytest.importorskip("cupy")
    with h5py.File(tmp_h5, "w", driver="gds") as f:
        d = f.create_dataset("x", shape=(1 << 22,), dtype="f4")
        s = cupy.cuda.Stream(non_blocking=True)
        with s:
            a = cupy.ones(1 << 22, "f4")
            for _ in range(20):
                a = a * 1.0 + 1.0  # queued on s; the write must wait for it
            h5gds.write(d, a)
        np.testing.assert_array_equal(d[:4], [21.0] * 4)


@pytest.mark.parametrize("staging", ["pinned", "device"])
@pytest.mark.parametrize("chunks", [None, (5, 33)])
def test_loader_on_gpu(tmp_path, module, staging, chunks):
    p = tmp_path / "l.h5"
    data = np.random.default_rng(0).random((777, 100)).astype("f4")
    with h5py.File(p, "w") as f:
        f.create_dataset("x", data=data, chunks=chunks)
        f.create_dataset("y", data=np.arange(777))
    with h5py.File(p, "r") as f:
        loader = h5gds.Loader((f["x"], f["y"]), 64, like=module, staging=staging, prefetch=3)
        seen = []
        for x, y in loader:
            assert type(x).__module__.split(".")[0] == module
            yh = to_host(y)
            np.testing.assert_array_equal(to_host(x), data[yh])
            seen += list(yh)
        assert sorted(seen) == list(range(777))
        if staging == "device":
            routes = loader.stats()[str(p)]
            assert set(routes) & {"staged", "cufile"}, routes


def test_torch_loader_in_training_loop(tmp_path):
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch without CUDA")
    p = tmp_path / "t.h5"
    with h5py.File(p, "w") as f:
        f["x"] = np.random.default_rng(0).random((512, 16)).astype("f4")
        f["y"] = (np.arange(512) % 4).astype("i8")
    model = torch.nn.Linear(16, 4).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with h5py.File(p, "r") as f:
        loader = h5gds.TorchLoader((f["x"], f["y"]), 64)
        for epoch in range(2):
            loader.sampler.set_epoch(epoch)
            for x, y in torch.utils.data.DataLoader(loader.as_dataset(), batch_size=None, num_workers=0):
                assert x.is_cuda and y.is_cuda
                loss = torch.nn.functional.cross_entropy(model(x), y)
                opt.zero_grad()
                loss.backward()
                opt.step()
        assert len(loader) == 8


@pytest.mark.parametrize("prefetch", [1, 3])
def test_loader_slot_reuse_waits_for_the_copy(tmp_path, module, prefetch):
    """Pinned batches are copied to the device asynchronously (on the
    loader's copy stream, after the work queued on the current stream); a
    slot is read into again only after its copy. A long kernel queued first
    delays every copy: batches kept until the end must still hold their own
    rows."""
    p = tmp_path / "r.h5"
    data = np.random.default_rng(1).integers(0, 1 << 30, (600, 257)).astype("i4")
    with h5py.File(p, "w") as f:
        f.create_dataset("x", data=data)
        f.create_dataset("y", data=np.arange(600))
    with h5py.File(p, "r") as f:
        loader = h5gds.Loader((f["x"], f["y"]), 32, like=module, prefetch=prefetch)
        for epoch in range(2):
            loader.set_epoch(epoch)
            if module == "torch":
                import torch
                torch.cuda._sleep(200_000_000)  # ~0.1 s on the current stream
            else:
                import cupy
                spin = cupy.RawKernel(r'''extern "C" __global__ void spin(long long n)
                    { long long t = clock64(); while (clock64() - t < n) {} }''', "spin")
                spin((1,), (1,), (np.int64(200_000_000),))
            kept = list(loader)
            seen = []
            for x, y in kept:
                yh = to_host(y)
                np.testing.assert_array_equal(to_host(x), data[yh])
                seen += list(yh)
            assert sorted(seen) == list(range(600))
        loader.close()
