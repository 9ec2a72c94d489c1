"""Where this project's builds live. The one Python module that names .build/ and what is in
it (caffe/build.sh makes them; everything else asks here)."""
import contextlib
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent
BUILD = ROOT / ".build"
CAFFE = BUILD / "caffe"               # install prefix of the current Caffe build: bin/, lib/, python/
CAFFE_KEY = BUILD / "caffe.key"       # the build's cache key (source + patches + options)
CPPMEM = BUILD / "cppmem_train"       # experiments/cppmem, linked against that Caffe
CPU_PROBE = BUILD / "cpu_probe"       # monitor/cpu_probe.cpp, linked against that Caffe
PYTHON = Path(sys.executable)         # the interpreter running us: the venv, or a GPU machine's own
# caffe/build.sh's cache of builds, one folder per key (scripts/defaults.sh: CAFFE_CACHE)
BUILD_CACHE = Path(os.environ.get("CAFFE_CACHE", Path.home() / ".cache" / "imgstore-caffe"))


class MissingBuild(RuntimeError):
    pass


def caffe_tool(name):
    """A Caffe command-line tool (caffe, convert_imageset, ...) of the current build."""
    path = CAFFE / "bin" / name
    if not path.exists():
        raise MissingBuild(f"{path} missing: run `make caffe`")
    return path


def cppmem_driver():
    if not CPPMEM.exists():
        raise MissingBuild(f"{CPPMEM} missing: run `make caffe`")
    return CPPMEM


def build_key():
    return CAFFE_KEY.read_text().strip() if CAFFE_KEY.exists() else None


def build_options():
    """The CMake options of the current build, as caffe/build.sh wrote them."""
    path = CAFFE.resolve().parent / "options"
    return path.read_text().split() if path.exists() else None


def cuda_built():
    return "-DCPU_ONLY=OFF" in (build_options() or [])


DELAY_PROXY = BUILD / "delay_proxy"   # data_prep/delay_proxy.c: network delay without netem


def delay_proxy_source():
    """A digest of the delay proxy's source (records name the proxy their 10 ms ran through)."""
    import hashlib
    return hashlib.sha256((ROOT / "data_prep" / "delay_proxy.c").read_bytes()).hexdigest()[:16]


def delay_proxy():
    """The delay proxy, compiled on first use (and again when its source changes)."""
    import os
    import subprocess
    source = ROOT / "data_prep" / "delay_proxy.c"
    if DELAY_PROXY.exists() and DELAY_PROXY.stat().st_mtime >= source.stat().st_mtime:
        return DELAY_PROXY
    BUILD.mkdir(exist_ok=True)
    partial = DELAY_PROXY.with_name(f"delay_proxy.partial{os.getpid()}")
    done = subprocess.run(["gcc", "-O2", "-Wall", "-pthread", "-o", str(partial), str(source)],
                          capture_output=True, text=True)
    if done.returncode != 0:
        raise MissingBuild(f"cannot compile {source}:\n{done.stderr}")
    os.replace(partial, DELAY_PROXY)
    return DELAY_PROXY


def image_decoder():
    """The OpenCV imgcodecs library Caffe's image decoding loads here (the GPU bundle carries a
    minimal build of its own, device/opencv_minimal.sh): its resolved path, or None."""
    import subprocess
    lib = CAFFE / "lib" / "libcaffe.so"
    if not lib.exists():
        return None
    try:
        out = subprocess.run(["ldd", str(lib)], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
    found = [line.split("=>")[1].split("(")[0].strip() for line in out.splitlines()
             if "libopencv_imgcodecs" in line and "=>" in line]
    return str(Path(found[0]).resolve()) if found and found[0] != "not found" else None


def cached_build(key):
    """The install prefix of the cached Caffe build `key` (bin/, lib/, python/)."""
    install = BUILD_CACHE / f"build-{key}" / "install"
    if not install.exists():
        raise MissingBuild(f"{install} missing: no cached Caffe build {key}")
    return install


@contextlib.contextmanager
def using_build(key):
    """The cached Caffe build `key` is the current one (.build/caffe and its key, so records name
    it) while the block runs, then the current one again: two builds measured side by side."""
    install = cached_build(key)
    saved, saved_key = os.readlink(CAFFE), CAFFE_KEY.read_text()
    try:
        _point_at(install, key + "\n")
        yield install
    finally:
        _point_at(saved, saved_key)


def _point_at(install, key_text):
    """.build/caffe -> install and its key, each replaced whole (a new link or file renamed over
    the old), so an interrupted swap leaves a working link."""
    link, key = CAFFE.with_name(CAFFE.name + ".new"), CAFFE_KEY.with_name(CAFFE_KEY.name + ".new")
    link.unlink(missing_ok=True)
    link.symlink_to(install)
    os.replace(link, CAFFE)
    key.write_text(key_text)
    os.replace(key, CAFFE_KEY)
