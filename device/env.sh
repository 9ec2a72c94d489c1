# Source this on the GPU machine, in the repository root, with .device-bundle carried along:
#   source device/env.sh && python3 experiments/run.py mnist lmdb cold --gpu 0
# It points the loader and Python at the bundle (device/bundle.sh), links it where the runner
# looks (.build/caffe, .build/cppmem_train), and fails loudly if a library is missing.
imgstore_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
imgstore_bundle=$imgstore_root/.device-bundle
if [ ! -f "$imgstore_bundle/BUNDLE.json" ]; then
  echo "device/env.sh: no bundle at $imgstore_bundle (make gpu-bundle here, then carry .device-bundle)" >&2
  return 1 2>/dev/null || exit 1
fi
imgstore_cudnn=$(python3 -c 'import nvidia.cudnn, os; print(os.path.join(list(nvidia.cudnn.__path__)[0], "lib"))' 2>/dev/null || true)
export LD_LIBRARY_PATH=$imgstore_bundle/lib:$imgstore_bundle/caffe/lib:/usr/local/cuda/lib64${imgstore_cudnn:+:$imgstore_cudnn}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
imgstore_site=/tmp/imgstore-site
if [ ! -d "$imgstore_site" ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --target "$imgstore_site" "$imgstore_bundle"/wheels/*.whl ||
    { echo "device/env.sh: could not install the bundle's wheels" >&2; return 1 2>/dev/null || exit 1; }
fi
export PYTHONPATH=$imgstore_root:$imgstore_site:$imgstore_bundle/caffe/python${PYTHONPATH:+:$PYTHONPATH}
mkdir -p "$imgstore_root/.build"
ln -sfn "$imgstore_bundle/caffe" "$imgstore_root/.build/caffe"
ln -sfn "$imgstore_bundle/cppmem_train" "$imgstore_root/.build/cppmem_train"
ln -sfn "$imgstore_bundle/cpu_probe" "$imgstore_root/.build/cpu_probe"
cp "$imgstore_bundle/caffe.key" "$imgstore_root/.build/caffe.key"
imgstore_missing=$(ldd "$imgstore_bundle"/caffe/bin/caffe "$imgstore_bundle"/caffe/python/caffe/_caffe.so \
                       "$imgstore_bundle"/cppmem_train "$imgstore_bundle"/cpu_probe 2>/dev/null | grep "not found" | sort -u)
if [ -n "$imgstore_missing" ]; then
  echo "device/env.sh: libraries this machine lacks and the bundle does not carry:" >&2
  echo "$imgstore_missing" >&2
  return 1 2>/dev/null || exit 1
fi
python3 -c 'import caffe' || { echo "device/env.sh: pycaffe does not import" >&2; return 1 2>/dev/null || exit 1; }
echo "imgstore: GPU bundle $(cat "$imgstore_bundle/caffe.key") ready ($(python3 -V), $(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1))"
