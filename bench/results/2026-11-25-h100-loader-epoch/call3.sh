#!/bin/bash
# the ceiling's configurations, and warm windowed epochs with more parallel window reads (64 KiB samples)
t0=$(date +%s)
bash build/loader-gpu/install.sh || exit 1
mkdir -p build/bench-loader
B="python3 -m h5gds.bench.loader_epoch epoch --dir build/bench-loader --samples 64KiB --repeat 1"
$B --out $OUT/ceiling --methods h5gds-windowed,ceiling-sequential --caches cold --ceiling 16x8MiB,4x32MiB,64x1MiB,32x4MiB,8x16MiB > $OUT/ceiling.log 2>&1
echo "ceiling rc $?: $(( $(date +%s) - t0 )) s"
for v in "--window 8MiB" "--window 8MiB --inflight 32" "--window 8MiB --config io_block_size=2MiB" "--window 8MiB --inflight 32 --config io_block_size=2MiB"; do
  echo "== $v" >> $OUT/warm.log
  $B --out /tmp/w --methods h5gds-windowed,h5gds-exact --caches warm $v 2>&1 | grep loader-epoch >> $OUT/warm.log
  $B --out /tmp/w --methods h5gds-windowed --caches cold $v 2>&1 | grep loader-epoch >> $OUT/warm.log
done
echo "warm: $(( $(date +%s) - t0 )) s"
cat $OUT/ceiling.log $OUT/warm.log | grep -v "^csv"
