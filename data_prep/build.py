"""Build artifacts (a dataset in a backend) safely, and verify them against the source.

Layout:  OUT/DATASET/mean.binaryproto          (cifar10, imagenet: as compute_image_mean)
         OUT/DATASET/BACKEND/manifest.json     (what it is, from what, footprint)
         OUT/DATASET/BACKEND/...               (the backend's files, train_* and test_*)
An artifact is written to OUT/DATASET/.BACKEND.partial and renamed when complete, so a
killed run never leaves something that looks finished; the next run removes the partial.
"""
import errno
import fcntl
import multiprocessing as mp
import os
import shutil
import time
from collections import deque
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

import numpy as np
from tqdm import tqdm

import processes
from data_prep import backends, datasets, locations, options
from data_prep import manifest as manifest_file
from data_prep.datasets import SourceError
from data_prep.manifest import Manifest, Split


# --- mean.binaryproto ----------------------------------------------------------------

def mean_from_sum(pixel_sum, count):
    """compute_image_mean's result from the exact per-pixel sum of `count` uint8 images.

    Caffe sums in float32 image by image, which is exact while a sum stays below 2**24
    (65,793 images of 255); there the two agree bit for bit. Beyond, Caffe's sum rounds
    and this one does not: the means differ by float32 rounding only. An exact sum is
    what lets parallel workers add their share in any order."""
    return pixel_sum.astype(np.float32) / np.float32(count)


def compute_mean(split, jobs=1, progress=True):
    """The train split's per-pixel mean, in a pass of its own (see mean_from_sum)."""
    pixel_sum = convert(split, None, None, jobs, want_sum=True, desc="mean", progress=progress)
    return mean_from_sum(pixel_sum, split.count)


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


# --- writing -----------------------------------------------------------------------

_WORK = {}  # what workers (threads, forked processes) read: split, backend, context, ...


def _encode_range(bounds):
    """Worker: make records lo..hi-1 (decode, generate), encode each for the backend (none:
    the record itself) unless nobody wants them, and sum their pixels exactly if asked.
    Returns (payloads, pixel sum, records made)."""
    split, backend, ctx = _WORK["split"], _WORK["backend"], _WORK["ctx"]
    total = np.zeros(split.shape, np.uint32) if _WORK["want_sum"] else None  # exact below 16.8M images of 255
    payloads = []
    for i in range(*bounds):
        record = split.get(i)
        if total is not None:
            np.add(total, record[2], out=total)
        if _WORK["want_payloads"]:
            payloads.append(backend.encode(record, ctx) if backend else record)
    return payloads, total, bounds[1] - bounds[0]


def _ranges(count, jobs):
    """Tasks of up to 64 records: few enough round trips, small enough to keep `jobs` busy."""
    size = max(1, min(64, count // (jobs * 4)))
    return [(lo, min(lo + size, count)) for lo in range(0, count, size)]


def _results(split, backend, ctx, jobs, want_payloads, want_sum):
    """_encode_range's results per range of records, in order."""
    _WORK.update(split=split, backend=backend, ctx=ctx, want_payloads=want_payloads, want_sum=want_sum)
    ranges = _ranges(split.count, jobs)
    if jobs <= 1 or split.count < 256:
        yield from map(_encode_range, ranges)
        return
    # OpenCV releases the GIL while it decodes, so image files decode in threads and nothing
    # is copied between processes; generating stand-ins and encoding arrays need processes.
    # forked workers die with this process (they would wait on their queue for ever)
    pool = (ThreadPoolExecutor(jobs) if split.decodes_files
            else ProcessPoolExecutor(jobs, mp_context=mp.get_context("fork"), initializer=processes.dies_with,
                                     initargs=(os.getpid(),)))
    try:
        yield from _bounded_map(pool, _encode_range, ranges, window=2 * jobs)
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def _bounded_map(pool, fn, items, window):
    """pool.map, in order, with at most `window` tasks in flight, so that results never
    pile up in memory when the one writer is slower than the workers."""
    pending = deque()
    for item in items:
        pending.append(pool.submit(fn, item))
        if len(pending) >= window:
            yield pending.popleft().result()
    while pending:
        yield pending.popleft().result()


def convert(split, backend, ctx, jobs, sink=None, want_sum=False, desc="", progress=True):
    """One pass over a split. Each record is made (decoded, generated) and encoded by
    `backend` (None: the record itself) in `jobs` workers (threads or forked processes, see
    `_results`), and handed in order to `sink` in this process, the one writer. Returns the
    split's exact int64 per-pixel sum when `want_sum`, so that the mean needs no pass of its
    own when a backend is written anyway."""
    total = np.zeros(split.shape, np.int64) if want_sum else None
    bar = tqdm(total=split.count, desc=desc, unit="img", disable=None if progress else True, smoothing=0.1)
    for payloads, part, made in _results(split, backend, ctx, jobs, sink is not None, want_sum):
        for payload in payloads:
            sink(payload)
        if want_sum:
            total += part
        bar.update(made)
    bar.close()
    return total


def materialized(split, jobs, progress, limit_bytes=2 << 30):
    """A split made once, in parallel, and held as arrays, for when several backends will be
    written from it (MNIST and CIFAR-10 are arrays already). Too large: the split as is."""
    c, h, w = split.shape
    if split.in_memory or split.count * c * h * w > limit_bytes:
        return split
    images = np.empty((split.count, c, h, w), np.uint8)
    labels, names = np.empty(split.count, np.int64), []

    def keep(record):
        images[len(names)], labels[len(names)] = record[2], record[1]
        names.append(record[0])
    convert(split, None, None, jobs, keep, desc=f"source {split.phase}", progress=progress)

    def get(i):
        return names[i], int(labels[i]), images[i]
    return datasets.Split(split.phase, split.count, split.shape, get, split.num_classes, in_memory=True)


@contextmanager
def dataset_lock(out):
    out.mkdir(exist_ok=True)
    with open(out / ".lock", "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        yield


def context(dataset, final_dir, mean, overwrite=False, source_fingerprint=None):
    """dataset: a Dataset or its name."""
    dataset = datasets.get(dataset) if isinstance(dataset, str) else dataset
    return backends.WriteContext(dataset=dataset, final_dir=final_dir, scale=dataset.model.transform.scale,
                                 mean=mean, overwrite=overwrite, source_fingerprint=source_fingerprint)


def write_artifact(source, backend, out, mean, jobs, progress=True, want_train_sum=False, overwrite=False, where=None):
    """Write one backend's artifact; returns its manifest and, if asked, the train split's
    exact pixel sum (for the mean, made in the same pass). where: its location's options
    ({name: value}: a Redis Cluster's seeds), for the backend's writer."""
    final = out / backend.name
    partial = out / f".{backend.name}.partial"
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir()
    where = where or {}
    with backend.session(partial, **where):  # a server up for the whole of it
        return _write_into(partial, source, backend, context(source.dataset, final, mean, overwrite, source.fingerprint),
                           jobs, progress, want_train_sum, where)


def where_of(backend, location_options):
    """The part of location_options ({name: value}) that `backend`'s location declares."""
    return options.for_owner(locations.get(backend.location), location_options or {})


def _write_into(partial, source, backend, ctx, jobs, progress, want_train_sum, where):
    out, final = partial.parent, ctx.final_dir
    started = time.time()
    train_sum = None
    try:
        for split in source.splits():
            want_sum = want_train_sum and split.phase == "train"
            with backend.writer(split, partial, ctx, **where) as w:
                total = convert(split, backend, ctx, jobs, w.add, want_sum,
                                desc=f"{source.dataset} {backend.name} {split.phase}", progress=progress)
            if want_sum:
                train_sum = total
        manifest = Manifest(
            dataset=source.dataset, backend=backend.name, caffe_layer=backend.layer,
            source=source.description, source_fingerprint=source.fingerprint,
            pretransformed=backend.pretransformed,
            transform={"scale": ctx.scale, "mean_file": bool(ctx.dataset.model.transform.mean_file)},
            channel_order="BGR", seconds=round(time.time() - started, 2),
            created=time.strftime("%Y-%m-%dT%H:%M:%S"),
            splits={s.phase: Split(s.count, tuple(s.shape), backend.footprint(partial, s.phase))
                    for s in source.splits()},
            footprint=backend.footprint(partial))
        manifest.write(partial)
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
    return manifest, train_sum


def load_manifest(out, backend_name):
    """The Manifest of OUT/BACKEND, or None where no complete artifact is."""
    return manifest_file.load(Path(out) / backend_name)


def prepare_missing(dataset, backend_names, out_root, count=None, log=print, location_options=None):
    """Prepare only the backends with no complete artifact under OUT_ROOT/DATASET; one that is
    there is used as it is (not compared with its source). Returns those it prepared. Refused
    (SourceError) where `count` train images are asked and an artifact of the dataset holds
    another number: a run would train on data other than it says (see _other_count)."""
    _other_count(Path(out_root) / dataset, count)
    missing = [b for b in backend_names if load_manifest(Path(out_root) / dataset, b) is None]
    if missing:
        prepare(dataset, missing, out_root, count=count, log=log, location_options=location_options)
    return missing


def prepare(dataset, backend_names, out_root, source_path=None, limit=None, count=None, seed=0,
            jobs=None, force=False, progress=True, log=print, location_options=None):
    """Write each named backend of a dataset (skipping those already made from the same
    source) and its mean.binaryproto. Raw backends go first: the first one's pass also sums
    the train pixels for the mean, which the pretransformed ones need before they start.
    location_options: where the artifacts are written ({name: value}, e.g. a Redis Cluster's
    seeds), each backend taking those of its location."""
    out_root = Path(out_root)
    if not out_root.parent.exists():
        raise SourceError(f"{out_root}: its parent folder {out_root.parent} does not exist")
    chosen = [backends.get(b) for b in backend_names]
    ds = datasets.get(dataset)
    if ds.standin and source_path is None and count is None:
        count = _standin_count(out_root / dataset, log)
    source = ds.load(source_path, seed=seed, count=count)
    if limit:
        source.train, source.test = source.train.limited(limit), source.test.limited(limit)
        source.fingerprint += f"+limit{limit}"
    log(f"{dataset}: {source.description}: {source.train.count} train + {source.test.count} test")
    jobs = jobs or os.cpu_count()
    out = out_root / dataset
    out_root.mkdir(exist_ok=True)
    results = {}
    with dataset_lock(out):
        todo = []
        for backend in chosen:
            old = load_manifest(out, backend.name)
            why_not = backend.unsupported(ds, **where_of(backend, location_options))
            if why_not:
                log(f"  {backend.name}: skipped for {dataset}: {why_not}")
            elif not force and old and old.source_fingerprint == source.fingerprint:
                log(f"  {backend.name}: up to date ({out / backend.name})")
                results[backend.name] = old
            else:
                todo.append(backend)
        if len(todo) > 1:  # several passes: make the records once
            source.train, source.test = (materialized(s, jobs, progress) for s in source.splits())
        mean = _current_mean(source, out, force)
        need_mean = ds.model.transform.mean_file and mean is None
        for backend in sorted(todo, key=lambda b: b.pretransformed):
            if need_mean and backend.pretransformed:
                mean, need_mean = _save_mean(compute_mean(source.train, jobs, progress), source, out, log), False
            results[backend.name], train_sum = write_artifact(source, backend, out, mean, jobs, progress,
                                                              want_train_sum=need_mean, overwrite=force,
                                                              where=where_of(backend, location_options))
            log(f"  {backend.name}: written in {results[backend.name].seconds} s")
            if need_mean:
                mean = _save_mean(mean_from_sum(train_sum, source.train.count), source, out, log)
                need_mean = False
        if need_mean:
            _save_mean(compute_mean(source.train, jobs, progress), source, out, log)
    return results


def _other_count(out, count):
    """Raises SourceError when `count` train images are asked and an artifact under `out` (any
    backend: they share the dataset's mean) holds another number of them. A folder holds one
    size; another is prepared in a data root of its own (--data), not over this one."""
    if count is None:
        return
    for path in sorted(out.glob(f"*/{manifest_file.FILE}")):
        held = manifest_file.load(path.parent).splits["train"].count
        if held != count:
            raise SourceError(f"{path.parent}: holds {held} train images, and {count} were asked (--count, or the "
                              f"dataset's default sizing); run with --count {held} to use it, or with "
                              f"--data naming another folder to prepare {count} there")


def _standin_count(out, log):
    """The train size of the stand-in already written here, if any: a backend added later must
    hold the same images (and must not replace the mean the others were made with)."""
    for manifest in sorted(out.glob(f"*/{manifest_file.FILE}")):
        count = manifest_file.load(manifest.parent).splits["train"].count
        log(f"  {out.name}: the stand-in already written here has {count} train images; using that "
            "(--count to choose)")
        return count
    return None


def _current_mean(source, out, force):
    """The dataset's mean.binaryproto if it was made from this source, else None."""
    path, stamp = out / "mean.binaryproto", out / "mean.source"
    if not force and path.exists() and stamp.exists() and stamp.read_text() == source.fingerprint:
        return read_mean(path)
    return None


def _save_mean(mean, source, out, log):
    write_mean(mean, out / "mean.binaryproto")
    (out / "mean.source").write_text(source.fingerprint)
    log(f"  mean.binaryproto written ({out / 'mean.binaryproto'})")
    return read_mean(out / "mean.binaryproto")


# --- verify ------------------------------------------------------------------------

def clean(dataset, backend_names, out_root, log=print, location_options=None):
    """Removes the dataset's artifacts in these backends (a cluster's records too, under the
    dataset's prefixes alone); its mean and the other backends' stay. location_options: where
    they are (a Redis Cluster's seeds), for an artifact that does not say."""
    out = Path(out_root) / dataset
    with dataset_lock(out):
        for name in backend_names:
            backend = backends.get(name)
            backend.remove(out / name, **where_of(backend, location_options))
            log(f"  {name}: removed ({out / name})")


def verify(dataset, backend_names, out_root, source_path=None, seed=0, progress=True, log=print):
    """Re-read every artifact; each must yield the source's (label, pixels) sequence
    (pretransformed ones: the transform of it, exactly). Returns the list of failures."""
    out = Path(out_root) / dataset
    failures, made = [], {}
    for name in backend_names:
        backend = backends.get(name)
        manifest = load_manifest(out, name)
        if manifest is None:
            if not backend.unsupported(datasets.get(dataset)):
                failures.append(f"{name}: no artifact at {out / name}")
            continue
        counts = tuple(manifest.splits[p].count for p in ("train", "test"))
        if counts not in made:  # backends of one dataset share the source: make it once
            made[counts] = _source_of(manifest, dataset, source_path, seed)
            made[counts].train, made[counts].test = (materialized(s, os.cpu_count(), progress)
                                                     for s in made[counts].splits())
        source = made[counts]
        mean = read_mean(out / "mean.binaryproto") if manifest.transform["mean_file"] else None
        ctx = context(dataset, out / name, mean)
        for split in source.splits():
            problem = _compare(split, backend, out / name, ctx, progress)
            if problem:
                failures.append(f"{name} {split.phase}: {problem}")
        log(f"  {name}: {'FAILED' if any(f.startswith(name + ' ') for f in failures) else 'ok'}")
    return failures


def _source_of(manifest, dataset, source_path, seed):
    counts = {p: s.count for p, s in manifest.splits.items()}
    source = datasets.load(dataset, source_path, seed=seed, count=counts["train"])
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
