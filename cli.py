"""imgstore: the project's one command. Each sub-command runs one module's main() with the
arguments that follow it, so `imgstore SUB --help` is that module's own help, and the script
path the docs name does the same thing:

  imgstore run mnist lmdb cold          # = python experiments/run.py mnist lmdb cold
  imgstore bench lmdb-read --help       # = python benchmarks/lmdb_read.py --help
  imgstore records repair results/mnist # = python experiments/records_repair.py results/mnist
"""
import importlib
import sys
from dataclasses import dataclass


@dataclass(frozen=True)
class Command:
    name: str              # the words after `imgstore`: "run", "bench lmdb-read"
    module: str            # whose main(argv) it runs
    help: str              # one line, for `imgstore --help`


# This module sits above every layer (it dispatches to data_prep, experiments, benchmarks,
# analysis and device), so it imports them by name only when a sub-command runs.
COMMANDS = (
    Command("prepare", "data_prep.prepare", "write a dataset into storage backends, as Caffe's data layers read them"),
    Command("run", "experiments.run", "train a stock net from one backend, warm or cold cache, and record the run"),
    Command("matrix", "experiments.matrix",
            "a dataset's whole matrix (make DATASET-all, DATASET-quick) and its summary"),
    Command("capacity", "benchmarks.capacity", "how many emulated accelerators this host keeps fed from each backend"),
    Command("multihost", "benchmarks.multihost",
            "the capacity question over several client hosts and one Redis Cluster"),
    Command("host-check", "benchmarks.host_check",
            "do the committed answers apply to this host? probe, predict, measure"),
    Command("hosts-table", "analysis.hosts_table", "predicted against measured on every host checked (--write: the docs)"),
    Command("calibrate", "benchmarks.calibration", "the emulated machines' fits checked, and the fidelity table"),
    Command("peers", "benchmarks.peers", "Caffe's data path beside DALI and PyTorch's DataLoader (needs make peers)"),
    Command("report", "analysis.report", "the paper's figures and tables from a results folder's records"),
    Command("capacity-report", "analysis.capacity", "AU against solvers per host, from the records of concurrent runs"),
    Command("answer", "benchmarks.answer_run",
            "the answer table measured on this host (--quick: ~10 min; --dry-run: the plan and its time)"),
    Command("answer-table", "analysis.answer",
            "the README's answer table and figure from the committed records (--folder: one host's answer)"),
    Command("lmdb-shared-report", "analysis.lmdb_shared", "the tables of LMDB's three read paths with N solvers"),
    Command("threads-report", "analysis.decode_threads",
            "the decode- and transform-threads tables (AU, busy shares) from recorded runs"),
    Command("redis", "data_prep.redis_cluster.cluster", "start, stop or ask about the project's Redis Cluster"),
    Command("rederive", "experiments.rederive", "re-derive records' log-derived fields with today's rules"),
    Command("supersede", "experiments.supersede", "mark recorded runs as superseded, with the reason"),
    Command("records repair", "experiments.records_repair",
            "move a records file's bad lines (a cut write, glued records) aside; the rest loads again"),
    Command("cpu-probe", "monitor.cpu_probe", "one core's speed at Caffe's image data path (every record carries it)"),
    Command("gpu-calibrate", "device.gpu_calibrate",
            "the calibration's GPU step in one short loan (--dry-run: its plan)"),
    Command("gpu-host", "device.gpu_host", "the GPU machine as another host: host-check and a capacity sweep"),
    Command("gpu-check", "device.gpu_check", "on a GPU machine: do Caffe's GPU paths compute what its CPU paths do?"),
    Command("bench convert-speed", "benchmarks.convert_speed",
            "data_prep's conversion against Caffe's convert_imageset"),
    Command("bench data-path", "benchmarks.data_path",
            "images/s each backend's data path delivers to a 0 ms accelerator"),
    Command("bench decode-threads", "benchmarks.decode_threads", "image files and the Data layer on 1, 2, ... threads"),
    Command("bench decoder", "benchmarks.decoder", "one image decoder against another on the same files"),
    Command("bench delay-proxy", "benchmarks.delay_proxy", "the delay proxy's own CPU per record relayed"),
    Command("bench gpu-time", "benchmarks.gpu_time", "the compute ceiling: each stock net with no I/O (caffe time)"),
    Command("bench io-limit", "benchmarks.io_limit",
            "a cold read of small files with and without the emulated disk's limits"),
    Command("bench lmdb-read", "benchmarks.lmdb_read", "cold read rate of Caffe's two LMDB read paths against dd"),
    Command("bench lmdb-shared", "benchmarks.lmdb_shared",
            "what N solvers cost the storage and the CPU, per LMDB read path"),
    Command("bench redis-failover", "benchmarks.redis_failover",
            "how long Caffe's Redis reader stops when a master is killed"),
    Command("bench redis-migration", "benchmarks.redis_migration",
            "how long Caffe's Redis reader stalls while slots move"),
    Command("bench redis-path", "benchmarks.redis_path",
            "images/s a Redis Cluster delivers to Caffe over added round trips"),
    Command("bench redis-reader", "benchmarks.redis_reader",
            "the prefetch thread's CPU per record, Redis against LMDB"),
    Command("bench runner-overhead", "benchmarks.runner_overhead",
            "a bare caffe train against the same run through run.py"),
)
# The scripts that are no sub-command: the project starts them itself, or they run
# in another interpreter. (tests/test_cli.py: every script is a sub-command or here.)
INTERNAL = {
    "experiments/pymem_train.py": "the pymem backend's training process, started by the runner",
    "experiments/lab_cluster.py": "forms the lab cluster from inside one of its server hosts",
    "data_prep/redis_cluster/keeper.py": "the cluster's keeper, started with its servers",
    "monitor/sampler.py": "the 1 Hz system sampler, started by the runner for each run",
    "peers/loaders.py": "one peer loader's cell, run by benchmarks/peers.py in .venv-peers",
    "analysis/claims.py": "prints the docs' numbers as the records make them (tests/test_claims_numbers.py)",
    "docker/check_records.py": "make docker-test's check of the records made inside the image",
    "scripts/docs_site.py": "make docs, in .venv-docs",
}
HELP_FLAGS = ("-h", "--help")


def usage(commands=COMMANDS, group=""):
    width = max(len(c.name) for c in commands)
    what = f"{group} NAME" if group else "SUB-COMMAND"
    lines = [f"usage: imgstore {what} [ARGS ...]   (imgstore {what} --help: its own help)", "", "sub-commands:"]
    lines += [f"  {c.name:<{width}}  {c.help}" for c in commands]
    return "\n".join(lines)


def find(words, commands=COMMANDS):
    """(the command the leading words name, the words left for it), or (None, words)."""
    for command in sorted(commands, key=lambda c: -len(c.name.split())):
        n = len(command.name.split())
        if words[:n] == command.name.split():
            return command, words[n:]
    return None, words


def dispatch(command, argv):
    module = importlib.import_module(command.module)
    sys.argv[0] = f"imgstore {command.name}"  # argparse's prog: the usage line names the sub-command
    return module.main(argv)


def main(argv=None):
    words = list(sys.argv[1:] if argv is None else argv)
    if not words or words[0] in HELP_FLAGS:
        print(usage())
        return 0
    command, rest = find(words)
    if command is None:
        group = [c for c in COMMANDS if c.name.split()[0] == words[0]]
        if group and (len(words) == 1 or words[1] in HELP_FLAGS):  # `imgstore bench`: what it has
            print(usage(group, words[0]))
            return 0
        what = f"{words[0]} {words[1]!r}" if group else repr(words[0])
        print(f"imgstore: no sub-command {what} (imgstore --help lists them)", file=sys.stderr)
        return 2
    return dispatch(command, rest)


if __name__ == "__main__":
    sys.exit(main())
