export PYTHONFAULTHANDLER=1 PYTHONPATH=$PWD/.device-carry/site HDF5_PLUGIN_PATH=$PWD/.device-carry/site/hdf5plugin/plugins H5GDS_NVCOMP_LIB=$PWD/.device-carry/nvcomp/libnvcomp.so.6
bash scripts/gpu.sh --tree-id > $OUT/tree.txt
bash scripts/gpu.sh python-install > $OUT/install.log 2>&1
K=/tmp/kc; rm -rf $K; S=$PWD/.device-carry/explore/kcache_time.py
(cd /tmp && for i in 1 2 3; do H5GDS_KERNEL_CACHE=0 python3 $S /tmp/kc.h5 "no cache $i"; done; H5GDS_CODEC_DEBUG=1 H5GDS_KERNEL_CACHE_DIR=$K python3 $S /tmp/kc.h5 "empty cache" 2>&1 | grep -v "^h5gds read\|batches\|^h5gds codec: [a-z]*code:" ; for i in 1 2 3; do H5GDS_KERNEL_CACHE_DIR=$K python3 $S /tmp/kc.h5 "from cache $i"; done; ls -la $K) > $OUT/kcache.txt 2>&1
cat $OUT/kcache.txt
PY_READY=1 H5GDS_TIMEOUT_PYTHON_TESTS=330 PYTEST_ARGS="-q -rs -p no:cacheprovider tests/test_compressed_gpu.py tests/test_compressed_write_gpu.py tests/test_blosc_gpu.py tests/test_errors.py tests/test_checkpoint.py tests/test_checkpoint_gpu.py tests/test_checkpoint_compression.py tests/test_gpu.py tests/test_driver.py tests/test_loader.py tests/test_netcdf_files.py" timeout 360 bash scripts/gpu.sh python-tests > $OUT/pytest.log 2>&1
tail -25 $OUT/pytest.log
