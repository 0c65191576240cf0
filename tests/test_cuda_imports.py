"""cuda_kernels has no import circle: the device functions both scan versions share live in ``_device.py`` and
the workspace in ``workspace.py``, which import nothing of the package, so ``chunked.py`` (v3) never imports
``scan.py`` (which imports ``chunked`` to run v3). And no module takes a private name from another: what one module
uses of another is that module's interface, so it is public there (as ``tests/test_imports.py`` checks for
``minimal``). Read from the source (imports inside functions included), no CUDA needed.
``python tests/test_cuda_imports.py`` prints the count."""
import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "cuda_kernels"


def _graph():
    """{module: set of cuda_kernels modules it imports anywhere in its source}."""
    graph = {}
    for path in PACKAGE.glob("*.py"):
        deps = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level == 1:
                deps |= {node.module} if node.module else {a.name for a in node.names}
            elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("cuda_kernels"):
                deps |= {node.module.split(".")[1]} if "." in node.module else {a.name for a in node.names}
        graph[path.stem] = deps - {path.stem}
    return graph


def test_no_module_of_cuda_kernels_imports_itself_back():
    graph = _graph()

    def reach(m, seen):
        for d in graph.get(m, ()):
            if d not in seen:
                seen.add(d)
                reach(d, seen)
        return seen

    circles = sorted(m for m in graph if m in reach(m, set()))
    assert circles == []


def test_the_shared_device_functions_sit_below_both_scan_versions():
    graph = _graph()
    assert graph["_device"] == set() and graph["workspace"] == set()
    assert {"_device", "workspace"} <= graph["chunked"] and "scan" not in graph["chunked"]
    assert {"_device", "workspace", "chunked", "sequential", "blelloch_host", "log_shares"} <= graph["scan"]
    assert graph["sequential"] == graph["blelloch"] == {"_device"}   # v1's and v2's kernels, below the host side
    assert graph["blelloch_host"] == {"blelloch", "workspace"}        # v2's host side, below scan.py
    assert graph["log_shares"] == {"_device", "sequential"}           # the log backward's elementwise kernels
    assert graph["chunked_kernels"] == {"_device"}                     # v3's kernels, below chunked.py's host side
    assert "chunked_kernels" in graph["chunked"] and "arrays" in graph["scan"]
    assert graph["arrays"] <= {"_device", "sequential"}                # the host arrays' checks, below scan.py


def test_the_window_kernels_sit_below_their_host_side():
    """window.py (host: arguments, plans, launches) imports the forward and backward kernel modules; the
    backward's kernels take the forward's block numbering from window_forward, and neither kernel module
    imports the host side or the scan's."""
    graph = _graph()
    assert {"window_forward", "window_backward", "scan", "arrays"} <= graph["window"]
    assert graph["window_forward"] == {"_device"}
    assert graph["window_backward"] == {"_device", "window_forward"}


def _private_uses(package=None):
    """{(importer, module, name)}: a private name (one leading underscore) that a module of cuda_kernels takes from
    another, by ``from .module import _name`` or as ``module._name`` where ``module`` was imported from the
    package (``from . import module``, ``from cuda_kernels import module as alias``)."""
    package = PACKAGE if package is None else package
    modules = {p.stem for p in package.glob("*.py")}
    uses = set()
    for path in package.glob("*.py"):
        tree, aliases = ast.parse(path.read_text()), {}
        for node in ast.walk(tree):
            if not isinstance(node, ast.ImportFrom):
                continue
            if node.level == 1 and node.module:
                source = node.module
            elif node.level == 0 and (node.module or "").startswith("cuda_kernels."):
                source = node.module.split(".")[1]
            else:
                source = None
            if node.level == 1 and not node.module or node.module == "cuda_kernels":
                aliases.update({a.asname or a.name: a.name for a in node.names if a.name in modules})
            elif source in modules:
                uses |= {(path.stem, source, a.name) for a in node.names}
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in aliases:
                uses.add((path.stem, aliases[node.value.id], node.attr))
    return sorted((i, m, n) for i, m, n in uses
                  if i != m and n.startswith("_") and not n.startswith("__"))


def test_no_module_takes_a_private_name_from_another():
    """What one module of cuda_kernels needs from another is public there (tests may still reach private helpers)."""
    assert _private_uses() == []


def test_the_private_name_check_sees_both_forms(tmp_path):
    """The check above can fail: ``from .a import _f`` and ``a._g`` after ``from . import a`` are both caught."""
    (tmp_path / "a.py").write_text("def _f():\n    pass\n\n\ndef _g():\n    pass\n")
    (tmp_path / "b.py").write_text("from .a import _f\n")
    (tmp_path / "c.py").write_text("from . import a\n\na._g()\n")
    assert _private_uses(tmp_path) == [("b", "a", "_f"), ("c", "a", "_g")]


if __name__ == "__main__":
    found = _private_uses()
    print(f"private names imported across modules of cuda_kernels: {len(found)}")
    for p in found:
        print("   ", *p)
