import os, subprocess, sys, statistics, json
sys.path[:0] = ["/work/main", "/work/main/tests"]
from pathlib import Path
from test_lmdb_read import net_file
BUILDS = {"before (0013)": "/root/.cache/imgstore-caffe/build-f8a48582ead9d00f/install/python",
          "after (0024)": "/root/.cache/imgstore-caffe/build-beded32facb72178/install/python"}
SCRIPT = """
import sys, time, caffe
net = caffe.Net(sys.argv[1], caffe.TEST)
n = int(sys.argv[2])
for _ in range(n): net.forward()          # one pass: the page cache and the window warm
c0, w0 = time.process_time(), time.time()
for _ in range(n): net.forward()
print(time.process_time() - c0, time.time() - w0, flush=True)
"""
out = {}
for db, records in (("data/mnist/lmdb/train_lmdb", 60000), ("data/cifar10/lmdb/train_lmdb", 50000)):
    for read in ("mmap", "coalesced"):
        net = net_file(Path(f"/tmp/ab-{read}.prototxt"), Path("/work/main") / db, 100, **({"lmdb_read": read} if read != "mmap" else {}))
        for r in range(3):
            for name, py in BUILDS.items():
                if read == "mmap" and name.startswith("before"):
                    continue
                env = dict(os.environ, PYTHONPATH=py, GLOG_minloglevel="2")
                p = subprocess.run([sys.executable, "-c", SCRIPT, str(net), str(records // 100)], capture_output=True, text=True, env=env)
                cpu, wall = map(float, p.stdout.split())
                out.setdefault((db.split("/")[1], read, name), []).append(cpu / records * 1e6)
for k, v in out.items():
    print(k, "CPU us/record per pass: median %.2f (%.2f-%.2f)" % (statistics.median(v), min(v), max(v)))
