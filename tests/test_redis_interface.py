"""The project's Redis Cluster and a user's behind one interface (data_prep/redis_cluster/interface.py):
each implements every member the interface names, with the interface's parameters; what the
backend, the runner and the benchmarks ask of a cluster is in the interface or documented as one
kind's own; and the keeper of a cluster is recognised by its command line whether this checkout
or an older one (its module then data_prep.redis_keeper) started it.
"""
import ast
import inspect

import pytest

from conftest import ROOT

# the modules that hold a cluster and call it (`cluster.X`, `self.cluster.X`)
CALLERS = ["experiments/runner.py", "data_prep/backends/redis_store.py",
           *sorted(str(p.relative_to(ROOT)) for p in (ROOT / "benchmarks").glob("*.py"))]


def kinds():
    from data_prep.redis_cluster.cluster import Cluster
    from data_prep.redis_cluster.external import ExternalCluster
    return [Cluster, ExternalCluster]


def abstract_members():
    from data_prep.redis_cluster.interface import ClusterInterface
    return sorted(ClusterInterface.__abstractmethods__)


@pytest.mark.parametrize("kind", kinds(), ids=lambda k: k.__name__)
def test_each_kind_implements_every_member_of_the_interface(kind):
    from data_prep.redis_cluster.interface import ClusterInterface
    assert issubclass(kind, ClusterInterface), f"{kind.__name__} does not derive from ClusterInterface"
    missing = [name for name in abstract_members() if getattr(kind, name) is getattr(ClusterInterface, name)]
    assert not missing and not kind.__abstractmethods__, \
        f"{kind.__name__} does not implement {', '.join(missing or sorted(kind.__abstractmethods__))}"


@pytest.mark.parametrize("kind", kinds(), ids=lambda k: k.__name__)
def test_each_kind_takes_the_interfaces_parameters(kind):
    from data_prep.redis_cluster.interface import ClusterInterface
    for name in abstract_members():
        asked = [p for p in inspect.signature(getattr(ClusterInterface, name)).parameters.values()
                 if p.kind is p.POSITIONAL_OR_KEYWORD]
        taken = inspect.signature(getattr(kind, name)).parameters
        lacking = [p.name for p in asked if p.name not in taken]
        assert not lacking, f"{kind.__name__}.{name} takes no {', '.join(lacking)}, which the interface names"


def members_called(source, path):
    """{member: first line} of every `cluster.X` and `self.cluster.X` in a module's source."""
    found = {}
    for node in ast.walk(ast.parse(source, path)):
        if isinstance(node, ast.Attribute):
            held = node.value
            if (isinstance(held, ast.Name) and held.id == "cluster") or \
                    (isinstance(held, ast.Attribute) and held.attr == "cluster"):
                found.setdefault(node.attr, node.lineno)
    return found


def test_callers_ask_only_what_the_interface_names_or_documents_as_one_kinds():
    from data_prep.redis_cluster.interface import EXTERNAL_ONLY, PROJECT_ONLY, ClusterInterface
    allowed = set(abstract_members()) | set(ClusterInterface.__annotations__) | set(PROJECT_ONLY) | set(EXTERNAL_ONLY)
    outside = [f"{path}:{line}: cluster.{member}" for path in CALLERS
               for member, line in members_called((ROOT / path).read_text(), path).items() if member not in allowed]
    assert not outside, ("members of a cluster used outside data_prep/redis_cluster/interface.py (name them in the interface, "
                         "or in PROJECT_ONLY or EXTERNAL_ONLY):\n" + "\n".join(outside))


def test_the_members_documented_as_one_kinds_are_that_kinds():
    from data_prep.redis_cluster.cluster import Cluster
    from data_prep.redis_cluster.external import ExternalCluster
    from data_prep.redis_cluster.interface import EXTERNAL_ONLY, PROJECT_ONLY
    project = Cluster(ROOT / "data" / "no-such-cluster-folder")  # nothing started: members only
    external = ExternalCluster([("127.0.0.1", 1)])
    assert [m for m in PROJECT_ONLY if not hasattr(project, m)] == []
    assert [m for m in EXTERNAL_ONLY if not hasattr(external, m)] == []


def test_the_check_sees_a_member_outside_the_interface():
    source = "def f(cluster, self):\n    cluster.start()\n    self.cluster.flushall()\n    redis_cluster.Cluster\n"
    assert members_called(source, "x.py") == {"start": 2, "flushall": 3}


@pytest.mark.parametrize("module", ["data_prep.redis_cluster.keeper", "data_prep.redis_keeper"])
def test_a_keeper_is_recognised_whichever_checkout_started_it(module, tmp_path):
    from data_prep.redis_cluster.servers import is_keeper_command
    root = tmp_path / "redis-cluster"
    assert is_keeper_command(["/usr/bin/python3", "-m", module, str(root), "--port", "7100"], root), \
        f"a keeper started as `python -m {module} ROOT` is not recognised as the cluster's"


def test_no_other_command_passes_for_the_keeper(tmp_path):
    from data_prep.redis_cluster.servers import is_keeper_command
    root = tmp_path / "redis-cluster"
    assert not is_keeper_command(["/usr/bin/python3", "-m", "data_prep.redis_cluster.keeper", str(tmp_path / "other")], root)
    assert not is_keeper_command(["/usr/bin/python3", "-m", "data_prep.redis_cluster.cluster", str(root)], root)
    assert not is_keeper_command(["sleep", "60"], root)
