"""Options declared as data by the module they belong to: a backend's reader (a DataParameter
field, set in the prototxt) or a location (how the runner reaches it). run.py turns each
declaration into a flag in its owner's argument group; values are checked here and nowhere
else; the record keeps what was chosen. Adding an option to a backend's reader touches that
backend's module (and its Caffe patch) only.
"""
from dataclasses import dataclass

from data_prep.errors import SourceError


class OptionError(SourceError):
    pass


def parse_ms(text):
    """'10ms', '0.5s', '10' (ms) -> milliseconds."""
    t = str(text).strip().lower()
    try:
        if t.endswith("ms"):
            return float(t[:-2])
        if t.endswith("s"):
            return float(t[:-1]) * 1000
        return float(t)
    except ValueError:
        raise OptionError(f"{text!r} is not a time such as 10ms or 0.1s") from None


@dataclass(frozen=True)
class Option:
    name: str                # the layer parameter's field (a reader's) or the location's keyword
    help: str
    kind: str = "int"        # int | flag | choice | ms (a time such as 10ms, in milliseconds) | text
    choices: tuple = ()      # kind choice: the values, the first being what happens without the option
    minimum: float = None    # kinds int and ms: the smallest value allowed
    flag_name: str = None    # the command-line flag when it is not --NAME-WITH-DASHES
    proto_enum: str = None   # a choice stored as this DataParameter enum (its value's upper-case name)
    patch: str = None        # the Caffe patch(es) adding the DataParameter field (and its values), for the error without it
    recorded_as: str = None  # a location's option: the key of location.describe() that says it
    message: str = "DataParameter"  # the layer parameter holding the field (ImageData's: ImageDataParameter)
    metavar: str = None      # what the help shows for the value, when not the kind's
    parse: object = None     # kind text: a function giving the value of the text (raises OptionError)
    written: bool = False    # a location's option that also says where prepare.py writes the artifact

    @property
    def flag(self):
        return self.flag_name or "--" + self.name.replace("_", "-")

    def add_to(self, group, owners):
        """The option's flag in an argparse group; owners: who declares it, for the help."""
        text = f"{self.help} (applies to {', '.join(owners)})"
        if self.kind == "flag":
            group.add_argument(self.flag, dest=self.name, action="store_true", default=None, help=text)
        else:
            group.add_argument(self.flag, dest=self.name, help=text, metavar=self._metavar(),
                               choices=self.choices or None)

    def _metavar(self):
        return self.metavar or {"int": "N", "ms": "TIME", "choice": None, "text": "TEXT"}.get(self.kind)

    def value(self, given):
        """The typed value of what the user gave (text, or True for a flag); OptionError names the flag."""
        if self.kind == "flag":
            return bool(given)
        if self.kind == "choice":
            if given not in self.choices:
                raise OptionError(f"{self.flag} {given!r}: choose from {', '.join(self.choices)}")
            return given
        if self.kind == "text":
            return self.parse(given) if self.parse else str(given)
        value = parse_ms(given) if self.kind == "ms" else self._int(given)
        if self.minimum is not None and value < self.minimum:
            raise OptionError(f"{self.flag} must be at least {self.minimum:g}")
        return value

    def _int(self, given):
        try:
            return int(given)
        except (TypeError, ValueError):
            raise OptionError(f"{self.flag} {given!r} is not a whole number") from None

    def proto_value(self, value):
        """What the layer parameter's field takes; OptionError when this Caffe build lacks the field."""
        from caffe.proto import caffe_pb2
        message = getattr(caffe_pb2, self.message)
        if self.name not in message.DESCRIPTOR.fields_by_name:
            where = f" (caffe/patches/{self.patch}: run make caffe)" if self.patch else ""
            raise OptionError(f"this Caffe build has no {self.message} {self.name}{where}")
        if self.proto_enum:
            enum = getattr(message, self.proto_enum)
            if str(value).upper() not in enum.keys():
                raise OptionError(f"this Caffe build's {self.name} has no {str(value).upper()} "
                                  f"(caffe/patches/{self.patch}: run make caffe)")
            return enum.Value(str(value).upper())
        return value


def declared(owners):
    """{option name: (Option, [owner names])} over objects with .name and .options; one name
    declared two different ways is a programming error, found at import."""
    found = {}
    for owner in owners:
        for option in owner.options:
            if option.name in found and found[option.name][0] != option:
                raise ValueError(f"option {option.name} declared differently by {owner.name} and "
                                 f"{', '.join(found[option.name][1])}")
            found.setdefault(option.name, (option, []))[1].append(owner.name)
    return found


def add_groups(parser, owners, title):
    """One argument group per owner holding the options it is first to declare."""
    table = declared(owners)
    for owner in owners:
        mine = [o for o in owner.options if table[o.name][1][0] == owner.name]
        if mine:
            group = parser.add_argument_group(title.format(name=owner.name, label=getattr(owner, "label", owner.name)))
            for option in mine:
                option.add_to(group, table[option.name][1])


def chosen(args, owners):
    """{name: typed value} of every declared option set on the parsed command line."""
    values = {}
    for name, (option, _) in declared(owners).items():
        given = getattr(args, name, None)
        if given is not None:
            values[name] = option.value(given)
    return values


def for_owner(owner, values):
    """The part of `values` that `owner` declares."""
    return {o.name: values[o.name] for o in owner.options if o.name in values}


def check_applies(values, owners, chosen_owners, words="{names} only"):
    """An option set for none of the chosen owners is an error, not silently ignored. words:
    how the error names the owners that declare it."""
    table = declared(owners)
    for name in values:
        option, declarers = table[name]
        if not any(name in {o.name for o in owner.options} for owner in chosen_owners):
            raise OptionError(f"{option.flag} applies to {words.format(names=', '.join(declarers))}")
