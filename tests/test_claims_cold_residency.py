"""docs/running.md: a run puts the artifact's page cache in the asked state and measures the
share resident with mincore. Only LMDB and the PNG files were tested cold; here LevelDB, HDF5,
pymem and cppmem, each run cold and warm through run.py on the mnist_small artifacts."""
import pytest

from conftest import ROOT, run
from data_prep import cache
from experiments.record import recorded

BACKENDS = ["leveldb", "hdf5", "pymem", "cppmem"]


@pytest.mark.parametrize("state", ["cold", "warm"])
@pytest.mark.parametrize("backend", BACKENDS)
def test_a_run_finds_the_cache_as_asked(mnist_small, tmp_path, backend, state):
    if state == "cold" and not cache.can_drop_caches():
        pytest.skip("needs root to drop caches")
    files = [p for p in (mnist_small / backend).rglob("*") if p.is_file()]
    if state == "cold":  # the other state first: the run must make the one asked, not find it
        cache.warm(files)
        assert cache.residency(files) > 0.95
    else:
        cache.fadvise_dontneed(files)
        assert cache.residency(files) < 0.05
    run([str(ROOT / ".venv" / "bin" / "python"), str(ROOT / "experiments" / "run.py"), "mnist", backend, state,
         "--accelerator", "1ms", "--iters", "20", "--data", str(mnist_small.parent), "--out", str(tmp_path),
         "--quiet"])
    [r] = recorded(tmp_path, "mnist")
    assert r.ok and r.backend == backend and r.cache == state
    if state == "cold":
        assert r.cache_resident_fraction <= 0.05, (r.cache_resident_fraction, r.cache_method)
        assert r.cache_method.startswith("drop_caches"), r.cache_method
    else:
        assert r.cache_resident_fraction >= 0.95, (r.cache_resident_fraction, r.cache_method)
        assert r.cache_method.startswith("read"), r.cache_method
