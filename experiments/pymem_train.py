#!/usr/bin/env python3
"""pymem: the paper's "in-memory arrays from Python". Loads the whole train and test arrays
into numpy float32 (data_prep/backends/pymem.py), hands them to the MemoryData layers with
pycaffe's set_input_arrays, then solves.

  python experiments/pymem_train.py SOLVER ARTIFACT_DIR DATASET [--gpu ID]
"""
import argparse
import sys
from pathlib import Path



def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("solver")
    p.add_argument("artifact")
    p.add_argument("dataset")
    p.add_argument("--gpu", type=int, default=-1)
    a = p.parse_args(argv)

    import caffe
    from data_prep import backends, build, datasets
    if a.gpu >= 0:
        caffe.set_device(a.gpu)
        caffe.set_mode_gpu()
    else:
        caffe.set_mode_cpu()
    dataset, dest = datasets.get(a.dataset), Path(a.artifact)
    model = dataset.model
    mean_path = dest.parent / "mean.binaryproto"
    mean = build.read_mean(mean_path) if model.transform.mean_file else None
    ctx = build.context(dataset, dest, mean)
    pymem = backends.get("pymem")
    train = pymem.arrays(dest, "train", ctx, model.batch)
    test = pymem.arrays(dest, "test", ctx, model.test_batch)
    print(f"pymem: loaded {len(train[1])} train and {len(test[1])} test records", file=sys.stderr)
    solver = caffe.get_solver(a.solver)
    solver.net.set_input_arrays(*train)
    for net in solver.test_nets:
        net.set_input_arrays(*test)
    solver.solve()


if __name__ == "__main__":
    sys.exit(main())
