export PYTHONPATH=$PWD/.device-carry/site HDF5_PLUGIN_PATH=$PWD/.device-carry/site/hdf5plugin/plugins H5GDS_NVCOMP_LIB=$PWD/.device-carry/nvcomp/libnvcomp.so.6
S=$PWD/.device-carry/explore/kcache_time.py
bash scripts/gpu.sh python-install > $OUT/install.log 2>&1
echo "== nvCOMP's fat binary"; cuobjdump --list-elf .device-carry/nvcomp/libnvcomp.so.6 2>&1 | sed 's/.*\.\(sm_[0-9a-z]*\)\..*/\1/' | sort | uniq -c | head; cuobjdump --list-ptx .device-carry/nvcomp/libnvcomp.so.6 2>&1 | sed 's/.*\.\(sm_[0-9a-z]*\)\..*/\1/' | sort | uniq -c | head
echo "== compute cache before"; du -sh ~/.nv/ComputeCache 2>&1; env | grep -i CUDA_CACHE
cd /tmp
rm -rf ~/.nv/ComputeCache /tmp/kc2
H5GDS_CODEC_DEBUG=1 H5GDS_KERNEL_CACHE_DIR=/tmp/kc2 python3 $S /tmp/kc.h5 "fresh machine state" 2>&1 | grep -E "kernels for|first read"
echo "== compute cache after"; du -sh ~/.nv/ComputeCache 2>&1
H5GDS_KERNEL_CACHE_DIR=/tmp/kc2 python3 $S /tmp/kc.h5 "second process" 2>&1 | grep "first read"
CUDA_CACHE_DISABLE=1 H5GDS_KERNEL_CACHE_DIR=/tmp/kc2 python3 $S /tmp/kc.h5 "CUDA_CACHE_DISABLE=1" 2>&1 | grep "first read"
python3 -c "
import time,cupy; t=time.perf_counter(); import ctypes; l=ctypes.CDLL('$PWD/.device-carry/nvcomp/libnvcomp.so.6'); print('dlopen nvcomp', round(time.perf_counter()-t,3))"
cd - >/dev/null
H5GDS_GPU_BUILDS=h14 H5GDS_TIMEOUT_CODEC_TESTS=200 timeout 260 bash scripts/gpu.sh build codec-tests > $OUT/codec.log 2>&1; grep -E "checks,|PASSED|FAILED" $OUT/codec.log | tail -12
