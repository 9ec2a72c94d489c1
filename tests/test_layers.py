"""The project's layers, lowest first, and the one rule between them: a module imports modules of
its own layer or of the layers below it, never of a layer above. Read from the source with ast,
nothing imported, so an import inside a function counts as much as one at the top.

A script is any .py file of the scripts layer (benchmarks/, device/, docker/, peers/, scripts/,
results/): a program run by make or by hand, or a helper beside such programs (benchmarks/flags.py),
with or without a `__main__` block of its own. Every file below that layer is a library module,
even one with a `__main__` block (experiments/run.py, data_prep/prepare.py, analysis/report.py): its
functions are there to be called, its command line is a convenience. So "no library module imports
a script" is the layer rule for the scripts layer; its failures say "imports a script".
"""
import ast

from conftest import ROOT

# Each top-level folder or module of the project in its layer, lowest first.
LAYERS = (
    ("base", ("processes", "toolchain", "catalogue")),  # child processes; where the builds and committed results live
    ("models", ("models",)),  # the nets and solvers, the emulated accelerators' times
    ("data", ("monitor", "data_prep")),  # the sampler and the CPU probe; datasets, backends, locations, prepare
    ("experiments", ("experiments",)),  # runs, records, the runner, the calibration model, the prediction
    ("analysis", ("analysis",)),  # tables, figures, the report, the fidelity tables, the claims in the docs
    ("scripts", ("benchmarks", "device", "docker", "peers", "scripts", "results", "cli")),  # cli: the one command
    ("tests", ("tests",)),
)
SCRIPTS = "scripts"
LEVEL = {part: level for level, (_, parts) in enumerate(LAYERS) for part in parts}
NAME = {part: name for name, parts in LAYERS for part in parts}
# Imports that climb today, each with why it is still there; the test fails on any other, and on
# an entry here that no longer climbs (remove it then).
KNOWN_CLIMBS = {}


def python_files(root=ROOT):
    """Every .py file of the project: not in hidden folders (.venv, .build), data/ or caches."""
    for path in sorted(root.rglob("*.py")):
        parts = path.relative_to(root).parts
        if not any(p.startswith(".") or p == "__pycache__" for p in parts) and parts[0] != "data":
            yield path


def part_of(relative):
    """The top-level folder or module a path relative to the root belongs to."""
    return relative.split("/")[0].removesuffix(".py")


def imported(tree, relative):
    """(line, module, the statement) of every import in a parsed file, relative ones resolved."""
    package = relative.split("/")[:-1]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name, node
        elif isinstance(node, ast.ImportFrom):
            base = package[:len(package) - node.level + 1] if node.level else []
            yield node.lineno, ".".join(base + ([node.module] if node.module else [])), node


def climbs(source, relative):
    """[(line, the statement, why)] of the imports of one file (`relative` to the root) that reach a layer
    above its own: modules of the project only (pycaffe's `caffe`, `conftest` and the standard
    library are not in LAYERS)."""
    mine = part_of(relative)
    found = []
    for line, module, node in imported(ast.parse(source, relative), relative):
        theirs = module.split(".")[0]
        if theirs in LEVEL and mine in LEVEL and LEVEL[theirs] > LEVEL[mine]:
            what = "a script" if NAME[theirs] == SCRIPTS else f"the {NAME[theirs]} layer"
            statement = ast.unparse(node)
            found.append((line, statement, f"`{statement}`: the {NAME[mine]} layer imports {what} ({theirs}/)"))
    return found


def all_climbs(root=ROOT):
    """{(file, the statement): (file, line, 'file:line: why')} over the project, each statement once."""
    found = {}
    for path in python_files(root):
        relative = path.relative_to(root).as_posix()
        for line, statement, why in climbs(path.read_text(), relative):
            found.setdefault((relative, statement), (relative, line, f"{relative}:{line}: {why}"))
    return found


def test_every_python_file_has_a_layer():
    unplaced = sorted({path.relative_to(ROOT).parts[0] for path in python_files()
                       if part_of(path.relative_to(ROOT).as_posix()) not in LEVEL})
    assert not unplaced, f"{', '.join(unplaced)}: not in tests/test_layers.py LAYERS; place each in its layer"


def test_no_module_imports_a_layer_above_its_own():
    found = [why for key, (*_, why) in sorted(all_climbs().items(), key=lambda kv: kv[1][:2])
             if key not in KNOWN_CLIMBS]
    assert not found, "imports that climb:\n" + "\n".join(found)


def test_every_known_climb_is_still_there():
    gone = sorted(set(KNOWN_CLIMBS) - set(all_climbs()))
    assert not gone, f"no longer climbing, remove from KNOWN_CLIMBS: {gone}"


def test_the_check_sees_lazy_dotted_and_relative_imports_and_names_the_script():
    source = ("import json\nimport caffe\nfrom experiments import record\n\n\ndef f():\n"
              "    from benchmarks.calibration import paper_cells\n    import analysis.report\n"
              "    from ..benchmarks import flags\n")
    found = climbs(source, "experiments/x.py")
    assert [(line, statement) for line, statement, _ in found] == [
        (7, "from benchmarks.calibration import paper_cells"), (8, "import analysis.report"),
        (9, "from ..benchmarks import flags")]
    assert found[0][2] == ("`from benchmarks.calibration import paper_cells`: the experiments layer imports "
                           "a script (benchmarks/)")
    assert "imports the analysis layer (analysis/)" in found[1][2]
    assert climbs(source, "benchmarks/y.py") == []  # the top layer may import every layer below it
    assert part_of("toolchain.py") == "toolchain" and part_of("data_prep/backends/lmdb.py") == "data_prep"
