#!/bin/bash
# install the package on the device machine (no network), as scripts/gpu.sh's python-install, from the
# committed tree (HEAD) when git is there: others' uncommitted work in progress stays out of the build
python3 -m pip install -q --no-index --find-links .whl-py scikit-build-core pathspec packaging || exit 1
src=$PWD
if false; then  # the device copy's .git is not this tree's history
  rm -rf /tmp/h5gds-src && mkdir -p /tmp/h5gds-src && git archive HEAD | tar -x -C /tmp/h5gds-src && src=/tmp/h5gds-src
  echo "building from HEAD $(git rev-parse --short HEAD)"
fi
HDF5_ROOT=$PWD/build/deps/hdf5-1.14.5 python3 -m pip install -q --no-build-isolation --no-deps --no-index $src/python \
  >/tmp/install.log 2>&1 || { tail -40 /tmp/install.log; exit 1; }
python3 -c "import h5gds, cupy, torch; print('h5gds', h5gds.__version__, 'cupy', cupy.__version__, 'torch', torch.__version__)"
