"""Build artifacts (a dataset in a backend) safely, and verify them against the source.

Layout:  OUT/DATASET/mean.binaryproto          (cifar10, imagenet: as compute_image_mean)
         OUT/DATASET/BACKEND/manifest.json     (what it is, from what, footprint)
         OUT/DATASET/BACKEND/...               (the backend's files, train_* and test_*)
An artifact is written to OUT/DATASET/.BACKEND.partial and renamed when complete, so a
killed run never leaves something that looks finished; the next run removes the partial.
"""
import errno
import fcntl
import json
import multiprocessing as mp
import os
import shutil
import time
from contextlib import contextmanager
from pathlib import Path

import numpy as np
from tqdm import tqdm

from data_prep import backends, sources
from data_prep.sources import SourceError

MANIFEST = "manifest.json"


def model_for(dataset):
    from models.nets import MODELS
    return MODELS[dataset]


# --- mean.binaryproto ----------------------------------------------------------------

def compute_mean(split, progress=True):
    """The per-pixel mean of the train split, accumulated in float32 image by image and
    divided once, exactly as Caffe's compute_image_mean does."""
    total = np.zeros(split.shape, np.float32)
    for _, _, pixels in tqdm(split.records(), total=split.count, desc="mean", unit="img",
                             disable=not progress, leave=False):
        total += pixels
    return total / np.float32(split.count)


def write_mean(mean, path):
    from caffe.proto import caffe_pb2
    c, h, w = mean.shape
    blob = caffe_pb2.BlobProto(num=1, channels=c, height=h, width=w)
    blob.data.extend(mean.ravel().tolist())
    _atomic_write(path, blob.SerializeToString())


def read_mean(path):
    from caffe.proto import caffe_pb2
    blob = caffe_pb2.BlobProto()
    blob.ParseFromString(Path(path).read_bytes())
    return np.array(blob.data, np.float32).reshape(blob.channels, blob.height, blob.width)


def _atomic_write(path, data):
    tmp = Path(str(path) + ".partial")
    tmp.write_bytes(data)
    os.replace(tmp, path)


# --- footprint ---------------------------------------------------------------------

def footprint(files):
    """Apparent bytes, allocated bytes and file count: the paper's Table 2."""
    apparent = allocated = 0
    for f in files:
        st = os.stat(f)
        apparent += st.st_size
        allocated += st.st_blocks * 512
    return {"apparent_bytes": apparent, "allocated_bytes": allocated, "files": len(files)}


# --- writing -----------------------------------------------------------------------

_WORK = {}  # what forked workers read: split, backend, context


def _encode(i):
    return _WORK["backend"].encode(_WORK["split"].get(i), _WORK["ctx"])


def _records(split, backend, ctx, jobs):
    if jobs <= 1 or split.count < 256:
        return (backend.encode(split.get(i), ctx) for i in range(split.count))
    _WORK.update(split=split, backend=backend, ctx=ctx)
    pool = mp.get_context("fork").Pool(jobs)
    chunk = max(1, min(256, split.count // (jobs * 8)))
    return _pool_iter(pool, pool.imap(_encode, range(split.count), chunksize=chunk))


def _pool_iter(pool, it):
    try:
        yield from it
    finally:
        pool.terminate()
        pool.join()


def materialized(split, jobs, progress, limit_bytes=2 << 30):
    """A split small enough for memory (MNIST, CIFAR-10), made once, in parallel, and held as
    arrays, so that the mean and each backend do not make every record again."""
    import numpy as np
    c, h, w = split.shape
    if split.in_memory or split.count * c * h * w > limit_bytes:
        return split
    images = np.empty((split.count, c, h, w), np.uint8)
    labels, names = np.empty(split.count, np.int64), []
    identity = backends.Backend()
    for i, (name, label, pixels) in enumerate(tqdm(_records(split, identity, None, jobs), total=split.count,
                                                   desc=f"source {split.phase}", unit="img",
                                                   disable=None if progress else True)):
        images[i], labels[i] = pixels, label
        names.append(name)

    def get(i):
        return names[i], int(labels[i]), images[i]
    return sources.Split(split.phase, split.count, split.shape, get, split.num_classes, in_memory=True)


@contextmanager
def dataset_lock(out):
    out.mkdir(exist_ok=True)
    with open(out / ".lock", "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        yield


def context(dataset, final_dir, mean):
    model = model_for(dataset)
    return backends.WriteContext(dataset=dataset, final_dir=final_dir, scale=model.transform.scale,
                                 mean=mean, imagefile_keys=dataset == "imagenet")


def write_artifact(source, backend, out, mean, jobs, progress=True):
    final = out / backend.name
    partial = out / f".{backend.name}.partial"
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir()
    ctx = context(source.dataset, final, mean)
    started = time.time()
    try:
        for split in source.splits():
            with backend.writer(split, partial, ctx) as w:
                bar = tqdm(total=split.count, desc=f"{source.dataset} {backend.name} {split.phase}",
                           unit="img", disable=None if progress else True, smoothing=0.1)  # None: off when not a terminal
                for payload in _records(split, backend, ctx, jobs):
                    w.add(payload)
                    bar.update()
                bar.close()
        manifest = {
            "dataset": source.dataset, "backend": backend.name, "caffe_layer": backend.layer,
            "source": source.description, "source_fingerprint": source.fingerprint,
            "pretransformed": backend.pretransformed,
            "transform": {"scale": ctx.scale, "mean_file": mean is not None},
            "channel_order": "BGR", "seconds": round(time.time() - started, 2),
            "created": time.strftime("%Y-%m-%dT%H:%M:%S"),
            "splits": {s.phase: {"count": s.count, "shape": list(s.shape),
                                 "footprint": footprint(backend.files(partial, s.phase))}
                       for s in source.splits()},
        }
        manifest["footprint"] = footprint(backend.files(partial))
        (partial / MANIFEST).write_text(json.dumps(manifest, indent=1))
    except OSError as e:
        shutil.rmtree(partial, ignore_errors=True)
        if e.errno == errno.ENOSPC:
            raise SourceError(f"{out}: disk full while writing {backend.name}; nothing was kept") from e
        raise
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise
    if final.exists():
        shutil.rmtree(final)
    os.replace(partial, final)
    return manifest


def load_manifest(out, backend_name):
    path = out / backend_name / MANIFEST
    return json.loads(path.read_text()) if path.exists() else None


def prepare(dataset, backend_names, out_root, source_path=None, limit=None, count=None, seed=0,
            jobs=None, force=False, progress=True, log=print):
    out_root = Path(out_root)
    if not out_root.parent.exists():
        raise SourceError(f"{out_root}: its parent folder {out_root.parent} does not exist")
    chosen = [backends.get(b) for b in backend_names]
    source = sources.load(dataset, source_path, seed=seed, count=count)
    if limit:
        source.train, source.test = source.train.limited(limit), source.test.limited(limit)
        source.fingerprint += f"+limit{limit}"
    log(f"{dataset}: {source.description}: {source.train.count} train + {source.test.count} test")
    source.train, source.test = (materialized(s, jobs or os.cpu_count(), progress) for s in source.splits())
    jobs = jobs or os.cpu_count()
    out = out_root / dataset
    out_root.mkdir(exist_ok=True)
    results = {}
    with dataset_lock(out):
        mean = _ensure_mean(source, out, force, progress, log)
        for backend in chosen:
            if dataset not in backend.supports:
                log(f"  {backend.name}: skipped for {dataset}: {backend.why_not}")
                continue
            old = load_manifest(out, backend.name)
            if not force and old and old["source_fingerprint"] == source.fingerprint:
                log(f"  {backend.name}: up to date ({out / backend.name})")
                results[backend.name] = old
                continue
            results[backend.name] = write_artifact(source, backend, out, mean, jobs, progress)
            log(f"  {backend.name}: written in {results[backend.name]['seconds']} s")
    return results


def _ensure_mean(source, out, force, progress, log):
    if not model_for(source.dataset).transform.mean_file:
        return None
    path, stamp = out / "mean.binaryproto", out / "mean.source"
    if not force and path.exists() and stamp.exists() and stamp.read_text() == source.fingerprint:
        return read_mean(path)
    mean = compute_mean(source.train, progress)
    write_mean(mean, path)
    stamp.write_text(source.fingerprint)
    log(f"  mean.binaryproto written ({path})")
    return read_mean(path)


# --- verify ------------------------------------------------------------------------

def verify(dataset, backend_names, out_root, source_path=None, seed=0, progress=True, log=print):
    """Re-read every artifact; each must yield the source's (label, pixels) sequence
    (pretransformed ones: the transform of it, exactly). Returns the list of failures."""
    out = Path(out_root) / dataset
    failures, made = [], {}
    for name in backend_names:
        backend = backends.get(name)
        manifest = load_manifest(out, name)
        if manifest is None:
            if dataset in backend.supports:
                failures.append(f"{name}: no artifact at {out / name}")
            continue
        counts = tuple(manifest["splits"][p]["count"] for p in ("train", "test"))
        if counts not in made:  # backends of one dataset share the source: make it once
            made[counts] = _source_of(manifest, dataset, source_path, seed)
            made[counts].train, made[counts].test = (materialized(s, os.cpu_count(), progress)
                                                     for s in made[counts].splits())
        source = made[counts]
        mean = read_mean(out / "mean.binaryproto") if manifest["transform"]["mean_file"] else None
        ctx = context(dataset, out / name, mean)
        for split in source.splits():
            problem = _compare(split, backend, out / name, ctx, progress)
            if problem:
                failures.append(f"{name} {split.phase}: {problem}")
        log(f"  {name}: {'FAILED' if any(f.startswith(name + ' ') for f in failures) else 'ok'}")
    return failures


def _source_of(manifest, dataset, source_path, seed):
    counts = {p: s["count"] for p, s in manifest["splits"].items()}
    source = sources.load(dataset, source_path, seed=seed, count=counts["train"])
    source.train, source.test = source.train.limited(counts["train"]), source.test.limited(counts["test"])
    return source


def _compare(split, backend, dest, ctx, progress):
    stored = backend.read(dest, split.phase, ctx)
    n = 0
    for (name, label, pixels), got in tqdm(zip(split.records(), stored), total=split.count,
                                           desc=f"verify {backend.name} {split.phase}",
                                           disable=not progress, leave=False):
        want = ctx.transform(pixels) if backend.pretransformed else pixels
        if got[0] != label:
            return f"record {n} ({name}): label {got[0]} != source {label}"
        if got[1].shape != want.shape or not np.array_equal(got[1], want):
            return f"record {n} ({name}): pixels differ from the source"
        n += 1
    rest = sum(1 for _ in stored)
    if n != split.count or rest:
        return f"{n + rest} records stored, source has {split.count}"
    return None
