"""How a run computes: a real GPU, the real CPU, or an emulated accelerator that takes a
profile's time per iteration (models/accelerators.json) inside real Caffe (EmulatedCompute).

  --accelerator h100        the profile's time for the dataset's net
  --accelerator 2.5ms       2.5 ms per training iteration (test: a third of it, times the batch ratio)
  --accelerator none        no emulation: the real CPU, or the real GPU with --gpu
"""
import json
from dataclasses import asdict, dataclass, fields
from pathlib import Path

PROFILES_FILE = Path(__file__).resolve().parents[1] / "models" / "accelerators.json"
FORWARD_SHARE = 1 / 3  # of a training iteration; backward (and update) is the rest


class AcceleratorError(ValueError):
    pass


@dataclass(frozen=True)
class Compute:
    mode: str                         # emulated | gpu | cpu
    accelerator: str = None           # profile name, or "2.5ms" as given
    ms_per_iteration: float = None    # one training iteration
    test_ms_per_iteration: float = None
    source: str = None
    host_copy_latency_us: float = None  # emulated host-to-device copies (caffe/patches/0010)
    host_copy_gbps: float = None

    @property
    def emulated(self):
        """(forward_ms, backward_ms) of a training iteration, for the EmulatedCompute layer."""
        if self.mode != "emulated":
            return None
        forward = self.ms_per_iteration * FORWARD_SHARE
        return round(forward, 4), round(self.ms_per_iteration - forward, 4)

    @property
    def host_copies(self):
        """The data layer's emulated_compute_param for the copies a GPU build would make, or None."""
        if self.mode != "emulated" or not (self.host_copy_latency_us or self.host_copy_gbps):
            return None
        return dict(host_copy_latency_us=self.host_copy_latency_us or 0, host_copy_gbps=self.host_copy_gbps or 0)

    def as_dict(self):
        return {k: v for k, v in asdict(self).items() if v is not None}

    @classmethod
    def from_dict(cls, d):
        """A record's compute (Record.compute) as a Compute; keys it does not know are ignored,
        and a record without one trained on the CPU."""
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in (d or {"mode": "cpu"}).items() if k in known})

    def seconds(self, work):
        """Compute time of `work` = (training iterations, extra forward passes, test iterations)
        (caffe_log.timed_compute) at this accelerator's speed, or None."""
        if self.ms_per_iteration is None or work is None:
            return None
        train, forwards, test = work
        return (train * self.ms_per_iteration + forwards * self.ms_per_iteration * FORWARD_SHARE
                + test * self.test_ms_per_iteration) / 1000


def profiles():
    return {k: v for k, v in json.loads(PROFILES_FILE.read_text()).items() if not k.startswith("_")}


def from_profile(name, model):
    table = profiles()
    if name not in table:
        raise AcceleratorError(f"unknown accelerator {name!r}: choose from {', '.join(table)}, "
                               f"a time such as 2.5ms, or none ({PROFILES_FILE})")
    if model.name not in table[name]:
        raise AcceleratorError(f"accelerator {name!r} has no time for the net {model.name!r} in {PROFILES_FILE}")
    entry, link = table[name][model.name], table[name].get("host_copies") or {}
    return Compute("emulated", name, entry["train_ms"], entry["test_ms"], entry["source"],
                   link.get("latency_us"), link.get("gbps"))


def from_time(text, model):
    try:
        ms = float(text.strip()[:-2])
    except ValueError:
        raise AcceleratorError(f"--accelerator {text}: not a time such as 2.5ms") from None
    if ms < 0:
        raise AcceleratorError(f"--accelerator {text}: a time must be >= 0")
    test_ms = ms * FORWARD_SHARE * model.test_batch / model.batch
    return Compute("emulated", f"{ms:g}ms", ms, round(test_ms, 4), "given on the command line")


def choose(text, model, gpu):
    """The Compute for --accelerator TEXT (None: real) on a run with GPU id `gpu` (-1: CPU)."""
    if text in (None, "none"):
        return real(model, gpu)
    if text.strip().endswith("ms"):
        return from_time(text, model)
    return from_profile(text, model)


def real(model, gpu, gpu_model=None):
    """Real compute; on an H100 its AU is measured against the h100 profile's ceiling."""
    if gpu < 0:
        return Compute("cpu")
    ceiling = None
    if gpu_model and "H100" in gpu_model:
        ceiling = from_profile("h100", model)
    if ceiling is None:
        return Compute("gpu")
    return Compute("gpu", "h100", ceiling.ms_per_iteration, ceiling.test_ms_per_iteration,
                   "ceiling for AU: " + ceiling.source)
