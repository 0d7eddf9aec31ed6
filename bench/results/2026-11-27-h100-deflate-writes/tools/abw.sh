# Kept as run: from the repository root on the GPU machine, with build/gpu-carry/{head,old}.tar (git archive
# of the commit measured and of 63cf699), build/deps/hdf5-1.14.5, .whl-py, and .device-carry/ holding these
# scripts, nvCOMP (nvcomp/) and hdf5plugin (site/); $OUT receives the CSV and the traces.
set -u
R=$OUT
nvidia-smi --query-gpu=name --format=csv,noheader
rm -rf /tmp/pkg-new /tmp/pkg-old
for v in new old; do
  W=/tmp/$v; rm -rf $W; mkdir -p $W/build/deps
  if [ $v = new ]; then tar -xf build/gpu-carry/head.tar -C $W; else tar -xf build/gpu-carry/old.tar -C $W; fi
  ln -s $PWD/build/deps/hdf5-1.14.5 $W/build/deps/; ln -s $PWD/.whl-py $PWD/.device-carry $W/
done
python3 -m pip install -q --no-index --find-links .whl-py scikit-build-core pathspec packaging
for v in new old; do
  (cd /tmp/$v && HDF5_ROOT=/tmp/$v/build/deps/hdf5-1.14.5 python3 -m pip install -q --no-build-isolation --no-deps --no-index --target /tmp/pkg-$v ./python > $R/install-$v.log 2>&1) || { echo install $v failed; tail $R/install-$v.log; }
done
export H5GDS_NVCOMP_LIB=$PWD/.device-carry/nvcomp/libnvcomp.so.6
echo "kind,level,variant,tag,GBps,stored,encode_s,wait_s,total_s" > $R/ab.csv
for round in ${ROUNDS:-1 2}; do
  for spec in "field 1" "image 1" "field 0"; do
    for v in new old; do
      PYTHONPATH=/tmp/pkg-$v:$PWD/.device-carry/site timeout 120 python3 .device-carry/abw.py $spec $v >> $R/ab.csv 2>> $R/trace-$v.log
    done
  done
  for spec in "field 1" "image 1" "field 0"; do
    for v in old new; do
      PYTHONPATH=/tmp/pkg-$v:$PWD/.device-carry/site timeout 120 python3 .device-carry/abw.py $spec $v >> $R/ab.csv 2>> $R/trace-$v.log
    done
  done
done
grep -v "warm-up\|trace" $R/ab.csv | sort | head -100

