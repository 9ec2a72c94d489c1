#!/usr/bin/env bash
# What a lent GPU machine has that the bundle relies on; run there (device tool), writes to $OUT.
#   device/probe.sh     -> $OUT/probe.txt, $OUT/ldconfig.txt, $OUT/python-include.tgz
out=${OUT:-/tmp/probe}; mkdir -p "$out"
{
  echo "== machine"; uname -a; nproc; free -g | head -2; grep -m1 "model name" /proc/cpuinfo
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  echo "== disk"; findmnt -T . ; lsblk -o NAME,MAJ:MIN,SIZE,ROTA,TYPE,MOUNTPOINT; df -h .
  echo "== cgroup"; stat -fc %T /sys/fs/cgroup; cat /sys/fs/cgroup/cgroup.controllers
  cat /sys/fs/cgroup/cgroup.subtree_control
  echo "== python"; command -v python3; python3 -V
  python3 - <<'PY'
import importlib, sysconfig
print("include", sysconfig.get_paths()["include"])
for m in ["numpy", "cv2", "google.protobuf", "h5py", "psutil", "pynvml", "tqdm", "PIL", "lmdb", "plyvel", "skimage"]:
    try:
        mod = importlib.import_module(m); print(m, getattr(mod, "__version__", "?"))
    except Exception as e:
        print(m, "MISSING", type(e).__name__)
try:
    import nvidia.cudnn; print("cudnn", list(nvidia.cudnn.__path__))
except Exception as e:
    print("cudnn MISSING", e)
PY
  echo "== cuda"; ls /usr/local/cuda/lib64 | grep -E "cublas|curand|cudart|cudnn" | head
  echo "== compilers"; g++ --version | head -1; cmake --version | head -1
} > "$out/probe.txt" 2>&1
ldconfig -p > "$out/ldconfig.txt"
# the Python headers (and Debian/Ubuntu's multiarch pyconfig.h), for building pycaffe for this Python
inc=$(python3 -c 'import sysconfig; print(sysconfig.get_paths()["include"])')
# Debian/Ubuntu's pyconfig.h only includes <MULTIARCH/python3.X/pyconfig.h>: take that one
conf=$(python3 - <<'PY'
import os, sysconfig
h = sysconfig.get_config_h_filename()
arch = sysconfig.get_config_var("MULTIARCH")
real = os.path.join("/usr/include", arch or "", os.path.basename(os.path.dirname(h)), "pyconfig.h")
wrapper = arch and f"<{arch}/" in open(h).read()
print(real if wrapper and os.path.exists(real) else h)
PY
)
tmp=$(mktemp -d); cp -a "$inc" "$tmp/include"; cp -L "$conf" "$tmp/include/pyconfig.h"
python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])' > "$tmp/include/VERSION"
tar -czf "$out/python-include.tgz" -C "$tmp" include; rm -rf "$tmp"
cat "$out/probe.txt"
