"""One run's configuration, declared as data: every run flag is a field of RunConfig carrying
its type, default, help, command-line flag, the record field it fills and whether it is part of
the setup. run.py's command line is generated from it, experiments.resolved computes once what it
implies, the runner takes a RunConfig, its record keeps it (Record.config), and "the same setup"
(experiments.resolved.same_setup) compares every field declared part of it: in Record.config, or
through its record field where experiments.resolved.SAID_BY compares that one (so that records
written before Record.config held the field compare too). The backends' and locations' read
options are declared by their owners (data_prep.options) and travel in RunConfig.options.

Adding a run flag: one field here (setup=False if runs that differ in it are still the same
setup; record=None unless another record field already says it), and the code that uses it.
"""
import argparse
import shlex
from dataclasses import MISSING, asdict, dataclass, field, fields, replace
from types import SimpleNamespace

import toolchain
from data_prep import backends, datasets, locations, options
from experiments import machines
from experiments.accelerators import profiles


@dataclass(frozen=True)
class Flag:
    """How a RunConfig field is given on the command line and what it means to a record."""
    flag: str                   # --NAME, or the positional argument's name
    help: object = None         # text, or a function giving it once the registries are loaded
    type: object = None         # what argparse converts the text with
    choices: object = None      # values, or a function giving them
    metavar: str = None
    action: str = None          # store_true for a switch
    rare: bool = False          # shown by --help-all only
    hidden: bool = False        # never shown
    exclusive: str = None       # the mutually exclusive group it belongs to
    record: str = None          # the Record field that says it (compared there); None: Record.config only
    setup: bool = True          # runs that differ in it are different setups (never the same cell)

    @property
    def positional(self):
        return not self.flag.startswith("-")

    def text(self, value):
        return value() if callable(value) else value


def flag(default=None, **declared):
    """A RunConfig field and its Flag."""
    return field(default=default, metadata={"flag": Flag(**declared)})


def _backends_help():
    return f"{', '.join(backends.REGISTRY)}, a comma-separated list, or all"


def _accelerator_help():
    return (f"emulate an accelerator: {', '.join(profiles())}, a time per iteration such as 2.5ms, or none "
            "(real compute). Default: the real GPU with a CUDA build, else h100 (titanx2016 under --profile "
            "paper2016)")


def _profile_help():
    return ("emulate a whole machine (experiments/machines.py): "
            + "; ".join(f"{m.name} = {m.summary}" for m in machines.PROFILES.values()))


def host_list(text):
    return tuple(filter(None, text.split(",")))


@dataclass(frozen=True)
class RunConfig:
    dataset: str = flag(None, flag="dataset", choices=lambda: list(datasets.REGISTRY), record="dataset", setup=False)
    backend: str = flag(None, flag="backend", help=_backends_help, record="backend", setup=False)
    cache: str = flag(None, flag="cache", choices=("warm", "cold", "all"), record="cache", setup=False)
    repeats: int = flag(1, flag="--repeats", type=int, record="repeat", setup=False)
    iters: int = flag(None, flag="--iters", type=int, help="max_iter (default: the stock solver's)",
                      record="iterations_setting")
    iters_reason: str = flag(None, flag="--iters-reason", hidden=True, record="iterations_reason", setup=False)
    test_interval: int = flag(None, flag="--test-interval", type=int, rare=True, setup=False,
                              help="test_interval (default: the stock solver's; made to divide max_iter so the "
                                   "last test runs at the last iteration)")
    gpu: int = flag(None, flag="--gpu", type=int, exclusive="device", record="compute",
                    help="GPU id (default: 0 when this Caffe has CUDA)")
    cpu: bool = flag(False, flag="--cpu", action="store_true", exclusive="device", record="compute",
                     help="train on the CPU for real, no emulation")
    accelerator: str = flag(None, flag="--accelerator", help=_accelerator_help, record="compute")
    mem_limit: str = flag(None, flag="--mem-limit", record="limits",
                          help="memory limit of the training cgroup, e.g. 4G (bounds the page cache)")
    mem_per_solver: str = flag(None, flag="--mem-per-solver", rare=True, record="limits",
                               help="with --concurrent N: memory added to --mem-limit for each solver beyond the "
                                    "first (e.g. 800M, a CaffeNet solver's own), so that the page cache keeps one "
                                    "solver's share at every N")
    cpus: int = flag(None, flag="--cpus", type=int, rare=True, record="limits",
                     help="cores the training may use (cpuset)")
    cpu_quota: float = flag(None, flag="--cpu-quota", type=float, metavar="CORES", rare=True, record="limits",
                            help="CPU time the training may use, in cores' worth shared by all its threads "
                                 "(cgroup CPU quota; 0.5: half of one core): a slower host's CPU")
    riops: int = flag(None, flag="--riops", type=int, rare=True, record="limits",
                      help="read IOPS limit on the data's disk")
    rbps: int = flag(None, flag="--rbps", type=int, rare=True, record="limits",
                     help="read bytes/s limit on the data's disk")
    profile: str = flag(None, flag="--profile", choices=lambda: list(machines.PROFILES), help=_profile_help,
                        record="limits")
    concurrent: int = flag(1, flag="--concurrent", type=int, metavar="N", record="concurrent",
                           help="N training processes on the same artifact at once, each its own accelerator "
                                "(emulated, or the same GPU); each is recorded, with the group's makespan and "
                                "device bytes")
    client_hosts: tuple = flag((), flag="--client-hosts", metavar="NS[,NS...]", type=host_list, rare=True,
                               record="concurrent",
                               help="run the solvers in these network namespaces, in turn, as if on that many "
                                    "client hosts (experiments/hosts.py makes them; benchmarks/multihost.py uses "
                                    "this)")
    cold_fallback: str = flag(None, flag="--cold-fallback", choices=("fadvise",), rare=True, record="cache_method",
                              setup=False,
                              help="without root, make 'cold' with posix_fadvise(DONTNEED) (recorded as such)")
    count: int = flag(None, flag="--count", type=int, rare=True, setup=False,
                      help="train images of a generated stand-in, when the data must be prepared first (an "
                           "existing artifact is used as it is)")
    data: str = flag(str(toolchain.ROOT / "data"), flag="--data", setup=False,
                     help="data root (default: %(default)s)")
    out: str = flag(str(toolchain.ROOT / "results"), flag="--out", setup=False,
                    help="results root (default: %(default)s)")
    again: bool = flag(False, flag="--again", action="store_true", rare=True, setup=False,
                       help="run even if already recorded")
    seed: int = flag(None, flag="--seed", type=int, rare=True, setup=False, help="solver random_seed")
    quiet: bool = flag(False, flag="--quiet", action="store_true", rare=True, setup=False,
                       help="no progress line while training")
    # the backends' and locations' read options given, as text: declared by their owners (data_prep.options);
    # part of the setup, said by the records' read_options and location
    options: dict = field(default_factory=dict, metadata={"setup": True, "record": "read_options"})

    def replace(self, **changes):
        return replace(self, **changes)

    def recorded(self):
        """What Record.config keeps: every field but where the data and results live."""
        return {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(self).items() if k not in ("data", "out")}


HELP_ALL_AFTER = "profile"  # where --help-all stands among the flags in the help


def flags():
    """[(field name, default, Flag)] in declaration order."""
    return [(f.name, f.default if f.default is not MISSING else f.default_factory(), f.metadata["flag"])
            for f in fields(RunConfig) if "flag" in f.metadata]


def flag_values(config):
    """{field: value} of config's flags that are not positional."""
    return {name: getattr(config, name) for name, _, f in flags() if not f.positional}


def option_owners():
    """Whoever declares read options: the backends, then the locations."""
    return list(backends.REGISTRY.values()), list(locations.REGISTRY.values())


def add_flags(parser, full=True):
    """RunConfig's flags in an argparse parser; full=False: the rare ones hidden. Returns the
    parser. --help-all and the owners' read options (full only) are added in their places."""
    groups = {}
    for name, default, f in flags():
        kwargs = dict(help=argparse.SUPPRESS if f.hidden or (f.rare and not full) else f.text(f.help))
        if f.action:
            kwargs.update(action=f.action)
        else:
            kwargs.update(type=f.type, choices=f.text(f.choices), metavar=f.metavar)
        if not f.positional:
            kwargs.update(dest=name, default=default)
        kwargs = {k: v for k, v in kwargs.items() if v is not None}
        if f.exclusive and f.exclusive not in groups:
            groups[f.exclusive] = parser.add_mutually_exclusive_group()
        (groups[f.exclusive] if f.exclusive else parser).add_argument(f.flag, **kwargs)
        if name == HELP_ALL_AFTER:
            _add_read_options(parser, full)
            parser.add_argument("--help-all", action="store_true", help="every option, the backends' read options too")
    return parser


def _add_read_options(parser, full):
    if full:
        readers, places = option_owners()
        options.add_groups(parser, readers, "reading from {name} ({label}): DataParameter fields")
        options.add_groups(parser, places, "data on a {name}")


def from_args(args):
    """The RunConfig of a parsed command line (an argparse Namespace from add_flags)."""
    readers, places = option_owners()
    given = {name: getattr(args, name) for name in options.declared(readers + places)
             if getattr(args, name, None) is not None}
    return RunConfig(**{name: getattr(args, name) for name, _, _ in flags()}, options=given)


def read_choice(config):
    """({read option: value}, {location option: value}) the config gives, checked (OptionError names the flag)."""
    given = SimpleNamespace(**config.options)
    readers, places = option_owners()
    return options.chosen(given, readers), options.chosen(given, places)


def setup_fields(config=None):
    """[(name, default, the Record field that says it or None)] of the fields declared part of the
    setup (Flag.setup), in declaration order: of config's own class (RunConfig without one)."""
    declared = []
    for f in fields(type(config) if config is not None else RunConfig):
        flag_ = f.metadata.get("flag")
        setup, record = (flag_.setup, flag_.record) if flag_ else (f.metadata.get("setup", False),
                                                                   f.metadata.get("record"))
        if setup:
            declared.append((f.name, f.default if f.default is not MISSING else f.default_factory(), record))
    return declared


def compared_in_config(config=None):
    """The declared setup: [(name, default)] of every field runs must agree in to be the same setup."""
    return [(name, default) for name, default, _ in setup_fields(config)]


def same_in_config(record_config, config, said_elsewhere=()):
    """Whether a record's config (None: written before records kept one: every such field at
    its default) is config's in every setup field but those whose record field is in
    said_elsewhere (compared there, so that records older than Record.config compare too)."""
    kept = record_config or {}
    return all(_comparable(kept.get(name, default)) == _comparable(getattr(config, name))
               for name, default, record in setup_fields(config) if record not in said_elsewhere)


def _comparable(value):
    return tuple(value) if isinstance(value, list) else value


def arguments(config):
    """config as run.py's arguments, the flags at their default left out: for a run in another
    process (a network namespace, a time limit) and for messages."""
    words = [str(getattr(config, name)) for name, _, f in flags() if f.positional]
    words += flag_words({name: getattr(config, name) for name, default, f in flags()
                         if not f.positional and getattr(config, name) != default})
    readers, places = option_owners()
    declared = options.declared(readers + places)
    for name, value in config.options.items():
        option = declared[name][0]
        words += [option.flag] if option.kind == "flag" else [option.flag, str(value)]
    return words


def flag_words(values):
    """{field: value} of RunConfig's flags (not positional) as run.py's words: a switch alone, a
    tuple comma-joined."""
    declared = {name: f for name, _, f in flags()}
    words = []
    for name, value in values.items():
        f = declared[name]
        if f.action:
            words += [f.flag] if value else []
        else:
            words += [f.flag, ",".join(value) if isinstance(value, tuple) else str(value)]
    return words


def command_line(config):
    return " ".join(shlex.quote(w) for w in arguments(config))
