"""What a run's configuration (experiments.config.RunConfig) implies, computed once by resolve():
the compute (GPU id, emulated accelerator), the training cgroup's limits, and the read and
location options given (read_for: those that apply to one backend). same_setup says whether a
record ran the setup a configuration asks, field by field as RunConfig declares its setup.
"""
from dataclasses import dataclass

import toolchain
from data_prep import backends, locations, options
from experiments import config as config_module
from experiments import machines
from experiments.cgroup import Limits


@dataclass(frozen=True)
class Resolved:
    gpu: int              # -1: the CPU
    accelerator: str      # an accelerators.json profile, a time per iteration ("2.5ms"), or None: real compute
    limits: Limits        # the training cgroup's
    reading: tuple        # ({read option: value}, {location option: value}) given, checked

    def read_for(self, backend):
        """(read options, location options) that apply to this backend: its reader's and its location's."""
        return options.for_owner(backends.get(backend), self.reading[0]), location_part(backend, self.reading[1])


def resolve(config):
    """The Resolved of a RunConfig; bad input raises (CgroupError, OptionError) naming the flag."""
    gpu, accelerator = compute_choice(config)
    return Resolved(gpu, accelerator, limits_choice(config), config_module.read_choice(config))


def compute_choice(config):
    """(gpu id, accelerator text or None for real compute)."""
    gpu = -1 if config.cpu else (config.gpu if config.gpu is not None else (0 if toolchain.cuda_built() else -1))
    if config.accelerator:
        return gpu, None if config.accelerator == "none" else config.accelerator
    if config.cpu or gpu >= 0:
        return gpu, None
    return gpu, machines.get(config.profile).accelerator if config.profile else "h100"


def limits_choice(config):
    return Limits.from_args(config.mem_limit, config.cpus, config.riops, config.rbps, config.profile,
                            config.mem_per_solver, config.cpu_quota)


def location_part(backend, location_options):
    """The location options that apply to this backend's location."""
    return options.for_owner(locations.get(backends.get(backend).location), location_options)


# How a setup field is compared where a record field other than Record.config says it (records
# written before Record.config held the field compare so too): by that record field's name.
def _iterations(r, resolved, config):
    return r.iterations_setting == config.iters


def _compute(r, resolved, config):
    c = r.compute or {}
    return (c.get("accelerator") if c.get("mode") == "emulated" else None) == resolved.accelerator


def _limits(r, resolved, config):
    return Limits.from_record(r.limits).as_dict() == resolved.limits.as_dict()


def _concurrent(r, resolved, config):
    together = r.concurrent or {}
    return together.get("solvers", 1) == config.concurrent and together.get("client_hosts", 0) == len(config.client_hosts)


def _reading(r, resolved, config):
    read_options, location_options = resolved.read_for(r.backend)
    reached = locations.get(backends.REGISTRY[r.backend].location).options_of(r.location)
    return reached == location_options and (r.read_options or {}) == read_options


SAID_BY = {"iterations_setting": _iterations, "compute": _compute, "limits": _limits, "concurrent": _concurrent,
           "read_options": _reading}


def same_setup(r, resolved, config):
    """Whether record r ran the setup `config` (resolved: its Resolved) asks: every field RunConfig
    declares part of the setup, through the record field that says it where SAID_BY compares that
    one, else in r.config (a field missing there: its default)."""
    if r.backend not in backends.REGISTRY:  # a backend no longer registered: nothing to compare
        return False
    said = list(dict.fromkeys(record for _, _, record in config_module.setup_fields(config) if record in SAID_BY))
    return (all(SAID_BY[record](r, resolved, config) for record in said)
            and config_module.same_in_config(r.config, config, said_elsewhere=SAID_BY))
