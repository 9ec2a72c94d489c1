"""Where this project's builds live. The one Python module that names .build/ and what is in
it (caffe/build.sh makes them; everything else asks here)."""
import contextlib
import json
import os
import sys
from pathlib import Path

from processes import process_id

ROOT = Path(__file__).resolve().parent
BUILD = ROOT / ".build"
CAFFE = BUILD / "caffe"               # install prefix of the current Caffe build: bin/, lib/, python/
CAFFE_KEY = BUILD / "caffe.key"       # the build's cache key (source + patches + options)
CPPMEM = BUILD / "cppmem_train"       # experiments/cppmem, linked against that Caffe
CPU_PROBE = BUILD / "cpu_probe"       # monitor/cpu_probe.cpp, linked against that Caffe
PYTHON = Path(sys.executable)         # the interpreter running us: the venv, or a GPU machine's own
# caffe/build.sh's cache of builds, one folder per key (scripts/defaults.sh: CAFFE_CACHE)
BUILD_CACHE = Path(os.environ.get("CAFFE_CACHE", Path.home() / ".cache" / "imgstore-caffe"))


# One run at a time per user (runs measure the machine). In the user's own folder: a fixed
# path in /tmp could be held, or made unwritable, by anyone. experiments/runner.py takes it.
RUN_LOCK = Path(os.environ.get("IMGSTORE_LOCK") or Path.home() / ".cache" / "imgstore" / "run.lock")
SWAP = BUILD / "caffe.swapped"        # while using_build(KEY) runs: who swapped the build, and the link it replaced
SWAP_ENV = "IMGSTORE_BUILD_SWAP"      # the same token, inherited by the swapping process's children


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


DELAY_PROXY_BUILT_FROM = BUILD / "delay_proxy.source"  # the digest of the source the binary was compiled from


def delay_proxy():
    """The delay proxy, compiled on first use and again whenever its source's digest differs from
    the one it was compiled from (the digest records name is then the binary's, whatever the
    files' times say)."""
    import subprocess
    source, digest = ROOT / "data_prep" / "delay_proxy.c", delay_proxy_source()
    if DELAY_PROXY.exists() and _read(DELAY_PROXY_BUILT_FROM) == digest:
        return DELAY_PROXY
    BUILD.mkdir(exist_ok=True)
    partial = DELAY_PROXY.with_name(f"delay_proxy.partial{os.getpid()}")
    done = subprocess.run(["gcc", "-O2", "-Wall", "-pthread", "-o", str(partial), str(source)],
                          capture_output=True, text=True)
    if done.returncode != 0:
        raise MissingBuild(f"cannot compile {source}:\n{done.stderr}")
    DELAY_PROXY_BUILT_FROM.unlink(missing_ok=True)  # no digest vouches for a binary being replaced
    os.replace(partial, DELAY_PROXY)
    _write_whole(DELAY_PROXY_BUILT_FROM, digest + "\n")
    return DELAY_PROXY


def _read(path):
    try:
        return path.read_text().strip()
    except OSError:
        return None


def _write_whole(path, text):
    partial = path.with_name(f"{path.name}.partial{os.getpid()}")
    partial.write_text(text)
    os.replace(partial, path)


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
    it) while the block runs, then the current one again: two builds measured side by side. Only
    while no run of this user trains (the run lock is free) and no other swap is on; runs started
    meanwhile by anything but this process and its children are refused (check_not_swapped)."""
    import fcntl
    install = cached_build(key)
    check_not_swapped()
    RUN_LOCK.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd = os.open(RUN_LOCK, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    with os.fdopen(fd, "r+") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            lock.seek(0)
            raise MissingBuild(f"cannot swap the Caffe build: a run is training ({lock.read().strip() or 'pid unknown'}, "
                               f"{RUN_LOCK}); swap once it is done") from None
        token = _process_token(os.getpid())
        saved, saved_key = os.readlink(CAFFE), CAFFE_KEY.read_text()
        # what to restore if this process is killed inside the block (check_not_swapped does)
        _write_whole(SWAP, json.dumps({"token": token, "key": key, "saved": saved, "saved_key": saved_key}) + "\n")
        os.environ[SWAP_ENV] = token
        fcntl.flock(lock, fcntl.LOCK_UN)  # the block's own runs take it
    try:
        _point_at(install, key + "\n")
        yield install
    finally:
        _point_at(saved, saved_key)
        os.environ.pop(SWAP_ENV, None)
        SWAP.unlink(missing_ok=True)


def check_not_swapped():
    """Raises MissingBuild while another process (not this one or a child of its) has swapped the
    current build for a cached one (using_build): a run would train on a build it did not ask for.
    A swap whose process is gone is over: a process killed inside the block left .build/caffe on
    the swapped build, which is pointed back at the build it replaced here, saying so on stderr."""
    held = _read(SWAP)
    if not held:
        return
    try:
        swap = json.loads(held)
        token, key = swap["token"], swap["key"]
    except (ValueError, KeyError, TypeError):  # an older checkout's "TOKEN KEY": no saved link
        swap, (token, _, key) = {}, held.partition(" ")
    token = str(token)
    pid = int(token.split(":")[0]) if token.split(":")[0].isdigit() else None
    if pid is None or _process_token(pid) != token:  # its process exited (or the pid is another's now)
        _restore(swap, pid, key)
        SWAP.unlink(missing_ok=True)
        return
    if os.environ.get(SWAP_ENV) != token:
        raise MissingBuild(f"the Caffe build is swapped for cached build {key.strip()} by pid {pid} (toolchain.using_build, "
                           f"{SWAP}) for a side-by-side measurement; run once it is done")


def _restore(swap, pid, key):
    """.build/caffe and its key as they were before the swap `swap` (SWAP's fields) of the gone
    process `pid`, where it left them on the swapped build."""
    saved, saved_key = swap.get("saved"), swap.get("saved_key")
    if not isinstance(saved, str) or not isinstance(saved_key, str):
        return
    try:
        current = os.readlink(CAFFE)
    except OSError:
        current = None
    if current == saved and _read(CAFFE_KEY) == saved_key.strip():
        return  # it had put them back, or was killed before it swapped
    _point_at(saved, saved_key)
    print(f"restored {CAFFE} -> {saved} (build {saved_key.strip()}): pid {pid} swapped it for cached build "
          f"{str(key).strip()} (toolchain.using_build) and was killed before it put it back", file=sys.stderr)


def _process_token(pid):
    """pid:start time: a process, not just its number, which the kernel reuses."""
    found = process_id(pid)
    return f"{found[0]}:{found[1]}" if found else None


def _point_at(install, key_text):
    """.build/caffe -> install and its key, each replaced whole (a new link or file renamed over
    the old), so an interrupted swap leaves a working link."""
    # names of this process's own: two processes restoring a killed swap at once must not collide
    link = CAFFE.with_name(f"{CAFFE.name}.new{os.getpid()}")
    key = CAFFE_KEY.with_name(f"{CAFFE_KEY.name}.new{os.getpid()}")
    link.unlink(missing_ok=True)
    link.symlink_to(install)
    os.replace(link, CAFFE)
    key.write_text(key_text)
    os.replace(key, CAFFE_KEY)
