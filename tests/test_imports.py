"""The package's imports point one way (DESIGN.md): no module of ``minimal`` imports itself back through others,
and the building blocks never reach up. Read from the source (imports inside functions included), nothing run."""
import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _modules():
    mods = {}
    for path in (ROOT / "minimal").rglob("*.py"):
        name = ".".join(path.relative_to(ROOT).with_suffix("").parts)
        mods[name.removesuffix(".__init__")] = path
    return mods


def _graph():
    """{module: the minimal modules it imports anywhere in its source}; a package's own __init__ (which Python
    runs first anyway) is not counted as an import of its children."""
    mods, graph = _modules(), {}
    for name, path in mods.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        deps = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = package
                for _ in range(node.level - 1):
                    base = base.rpartition(".")[0]
                module = (f"{base}.{node.module}" if node.module else base) if node.level else node.module
                targets = [module] + [f"{module}.{a.name}" for a in node.names]
            else:
                continue
            deps |= {t for t in targets if t in mods and t != name and not name.startswith(t + ".")}
        graph[name] = deps
    return graph


def test_no_module_imports_itself_back():
    graph = _graph()

    def reach(m, seen):
        for d in graph[m]:
            if d not in seen:
                seen.add(d)
                reach(d, seen)
        return seen

    assert sorted(m for m in graph if m in reach(m, set())) == []


def test_layers_scans_and_the_contract_never_import_cells_models_or_experiments():
    low = ("minimal.layers", "minimal.scan", "minimal._scan_numba", "minimal.contract", "minimal.validate",
           "minimal.conventions")
    high = ("minimal.cells", "minimal.models", "minimal.experiments")
    up = sorted((m, d) for m, deps in _graph().items() if m.startswith(low) for d in deps if d.startswith(high))
    assert up == []


def test_the_library_never_imports_the_cli():
    cli = ("minimal.__main__", "minimal.reproduce", "minimal.reproduce_all")
    below = ("minimal.cells", "minimal.layers", "minimal.models", "minimal.experiments", "minimal.tasks",
             "minimal.analysis", "minimal.constructions", "minimal.scan", "minimal.optim", "minimal.train")
    up = sorted((m, d) for m, deps in _graph().items() if m.startswith(below) for d in deps if d.startswith(cli))
    assert up == []
