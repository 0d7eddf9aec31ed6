#!/bin/bash
# tests of the loader on the GPU, then the loader-epoch benchmark (one call: the machine is not kept between calls)
t0=$(date +%s)
left() { echo $(( ${1} - ($(date +%s) - t0) )); }
bash build/loader-gpu/install.sh || exit 1
echo "install: $(( $(date +%s) - t0 )) s"; nproc; df -h . | tail -1; nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
git log --oneline -1 2>/dev/null
(cd python && timeout 150 python3 -m pytest -q -rs -p no:cacheprovider tests/test_loader.py tests/test_loader_windowed.py \
   tests/test_loader_randomness.py tests/test_gpu.py -k "loader or windowed or ragged or Loader" 2>&1 | tail -25) > $OUT/gpu-tests.txt
tail -8 $OUT/gpu-tests.txt; echo "tests: $(( $(date +%s) - t0 )) s"
mkdir -p build/bench-loader
timeout $(left 430) python3 -m h5gds.bench.loader_epoch epoch --dir build/bench-loader --out $OUT/main --samples 4KiB,6KiB,64KiB \
  --repeat 2 --read-bytes 512MiB --warm-read-bytes 512MiB --sweep-windows 2MiB,4MiB,16MiB > $OUT/main.log 2>&1
echo "main rc $?: $(( $(date +%s) - t0 )) s"; tail -5 $OUT/main.log
rm -f build/bench-loader/loader-epoch-4KiB.h5 build/bench-loader/loader-epoch-64KiB.h5
timeout $(left 575) python3 -m h5gds.bench.loader_epoch epoch,train --dir build/bench-loader --out $OUT/extra --samples 100KB,var \
  --repeat 1 --read-bytes 512MiB --warm-read-bytes 512MiB > $OUT/extra.log 2>&1
echo "extra rc $?: $(( $(date +%s) - t0 )) s"; tail -5 $OUT/extra.log
