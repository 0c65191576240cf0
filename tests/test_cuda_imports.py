"""cuda_kernels has no import circle: the device functions both scan versions share live in ``_device.py`` and
the workspace in ``workspace.py``, which import nothing of the package, so ``chunked.py`` (v3) never imports
``scan.py`` (which imports ``chunked`` to run v3). Read from the source (imports inside functions included),
no CUDA needed."""
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
    assert {"_device", "workspace", "chunked", "sequential", "blelloch"} <= graph["scan"]
    assert graph["sequential"] == graph["blelloch"] == {"_device"}   # v1's and v2's kernels, below the host side
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
