# Kept as run: from the repository root on the GPU machine, with build/gpu-carry/{head,old}.tar (git archive
# of the commit measured and of 63cf699), build/deps/hdf5-1.14.5, .whl-py, and .device-carry/ holding these
# scripts, nvCOMP (nvcomp/) and hdf5plugin (site/); $OUT receives the CSV and the traces.
# unpack head.tar into /tmp/new, install the package into /tmp/pkg-new, make /tmp/wd/field.npy (idempotent)
if [ ! -d /tmp/pkg-new/h5gds ]; then
  W=/tmp/new; rm -rf $W; mkdir -p $W/build/deps; tar -xf build/gpu-carry/head.tar -C $W
  ln -s $PWD/build/deps/hdf5-1.14.5 $W/build/deps/; ln -s $PWD/.whl-py $PWD/.device-carry $W/
  python3 -m pip install -q --no-index --find-links .whl-py scikit-build-core pathspec packaging
  (cd $W && HDF5_ROOT=$W/build/deps/hdf5-1.14.5 python3 -m pip install -q --no-build-isolation --no-deps --no-index --target /tmp/pkg-new ./python > /tmp/install-new.log 2>&1) || { echo install failed; tail /tmp/install-new.log; }
fi
mkdir -p /tmp/wd
[ -f /tmp/wd/field.npy ] || PYTHONPATH=/tmp/pkg-new:$PWD/.device-carry/site python3 -c "
import numpy as np
from h5gds.bench.compressed import make_rows
rows, width = 256, 1024
rng = np.random.default_rng(7)
np.save('/tmp/wd/field.npy', np.concatenate([make_rows('field', r, rows * 64, width, rng) for r in range(0, 262144, rows * 64)]))
" 2>&1 | grep -v "Cannot init"
