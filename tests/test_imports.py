"""The package's imports point one way (DESIGN.md): no module of ``minimal`` imports itself back through others,
and the building blocks never reach up; every name has one address (no module re-exports another's name) and no
module takes a private name from another. Read from the source (imports inside functions included; for the
addresses also tests/, bench/ and the notebooks' code cells), nothing run. ``python tests/test_imports.py`` prints
the counts."""
import ast
import json
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


# The layers, lowest first: a module imports only from its own layer or the ones below (a name stands for the
# module and everything under it; the longest name that matches decides). Every module of minimal is in one. The
# folders are the floors' rooms: minimal.run (the run machinery) spans several layers, its package docstring none.
LAYERS = (
    ("minimal.validate", "minimal.products", "minimal.conventions", "minimal.run", "minimal.course", "minimal.run._atomic", "minimal.run.io", "minimal.data", "minimal.contract",
     "minimal.gradcheck", "minimal.run.verdicts", "minimal.run.overrides", "minimal.run.speed", "minimal.course.nbtidy",
     "minimal.run.job_files", "minimal.run.scheduler", "minimal.run.interrupt", "minimal.run.metric_keys"),
    ("minimal.scan", "minimal.layers", "minimal.optim", "minimal.run.train", "minimal.run.checkpoint", "minimal.run.stopping",
     "minimal.run.evaluations"),
    ("minimal.cells", "minimal.models", "minimal.kernel_attention"),
    ("minimal.constructions", "minimal.analysis", "minimal.tasks", "minimal.run.sweep", "minimal.run.report"),
    ("minimal.experiments", "minimal.bench", "minimal.check",
     "minimal.course.build", "minimal.course.site", "minimal.course.slides", "minimal.course.assignments",
     "minimal.course.grading", "minimal.course.judge", "minimal.course.sandbox", "minimal.course.grader"),
    ("minimal.reproduce.work", "minimal.reproduce.index", "minimal.reproduce.cli", "minimal.__main__", "minimal"),
)


def _layer(module):
    found = [(len(p), i) for i, layer in enumerate(LAYERS) for p in layer if module == p or module.startswith(p + ".")]
    return max(found)[1] if found else None


def test_every_module_has_a_layer_and_no_import_points_up():
    graph = _graph()
    assert sorted(m for m in graph if _layer(m) is None) == []
    up = sorted((m, d) for m, deps in graph.items() for d in deps if _layer(d) > _layer(m))
    assert up == []


def test_the_results_page_never_imports_an_experiment():
    """report sits below the experiments: their page data comes in as an argument (``pages``), and the verdict rules
    they share (``Tolerance``) live in ``minimal.run.verdicts``."""
    graph = _graph()
    assert sorted(d for d in graph["minimal.run.report"] | graph["minimal.run.verdicts"] if d.startswith("minimal.experiments")) == []
    assert _layer("minimal.run.report") < _layer("minimal.experiments")


def test_the_library_never_imports_the_cli():
    cli = ("minimal.__main__", "minimal.reproduce.work", "minimal.reproduce.index", "minimal.reproduce.cli",
           "minimal.bench.cli")
    below = ("minimal.cells", "minimal.layers", "minimal.models", "minimal.experiments", "minimal.tasks",
             "minimal.analysis", "minimal.constructions", "minimal.scan", "minimal.optim", "minimal.run.train")
    up = sorted((m, d) for m, deps in _graph().items() if m.startswith(below) for d in deps if d.startswith(cli))
    assert up == []


# ---- one address per name ----------------------------------------------------------------------------------------
# (module, name): re-exported on purpose, with the reason.
ALLOWED_REEXPORTS = {
}
# (importing module, module, name): a private name one module of minimal takes from another, with the reason.
ALLOWED_PRIVATE = {}


def _resolve(node, name, path):
    if not node.level:
        return node.module
    base = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for _ in range(node.level - 1):
        base = base.rpartition(".")[0]
    return f"{base}.{node.module}" if node.module else base


def _sources():
    """(importer, path, syntax tree): minimal's modules, then tests/, bench/, cuda_kernels/ and the notebooks'
    code cells (shell and magic lines left out)."""
    out = [(name, path, ast.parse(path.read_text(encoding="utf-8"))) for name, path in _modules().items()]
    for folder in ("tests", "bench", "cuda_kernels"):
        out += [(str(p.relative_to(ROOT)), p, ast.parse(p.read_text(encoding="utf-8")))
                for p in sorted((ROOT / folder).rglob("*.py"))]
    for p in sorted((ROOT / "notebooks").glob("*.ipynb")):
        cells = json.loads(p.read_text(encoding="utf-8"))["cells"]
        code = "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "code")
        code = "\n".join(line for line in code.splitlines() if not line.lstrip().startswith(("%", "!")))
        out.append((str(p.relative_to(ROOT)), p, ast.parse(code)))
    return out


def _uses(sources, mods):
    """{(importer, module, name)}: ``from module import name`` and ``alias.name`` where alias is the module."""
    uses = set()
    for importer, path, tree in sources:
        aliases = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                src = _resolve(node, importer, path) if importer in mods else node.module
                for a in node.names if src in mods else ():
                    if f"{src}.{a.name}" in mods:
                        aliases[a.asname or a.name] = f"{src}.{a.name}"
                    else:
                        uses.add((importer, src, a.name))
            elif isinstance(node, ast.Import):
                aliases.update({a.asname: a.name for a in node.names if a.name in mods and a.asname})
        for node in ast.walk(tree):
            if not isinstance(node, ast.Attribute):
                continue
            chain, n = [node.attr], node.value
            while isinstance(n, ast.Attribute):
                chain, n = [n.attr] + chain, n.value
            if not isinstance(n, ast.Name) or (n.id not in aliases and n.id != "minimal"):
                continue
            base = aliases.get(n.id, "minimal")
            for part in chain:
                if f"{base}.{part}" not in mods:
                    uses.add((importer, base, part))
                    break
                base = f"{base}.{part}"
    return uses


def _addresses():
    """(re-exports, private imports): (module, name, home) for each public name a module binds with ``from X
    import name`` and offers as its own (in its __all__, or imported from it elsewhere); (importer, module, name)
    for each private name a module of minimal takes from another."""
    mods, bound, exported = _modules(), {}, {}
    for name, path in mods.items():
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.ImportFrom) and _resolve(node, name, path) in mods:
                src = _resolve(node, name, path)
                bound.update({(name, a.asname or a.name): src for a in node.names if f"{src}.{a.name}" not in mods})
            elif isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "__all__" for t in node.targets):
                exported[name] = set(ast.literal_eval(node.value))
    uses = _uses(_sources(), mods)
    taken = {(m, n) for importer, m, n in uses if importer != m}
    reexports = sorted((m, n, src) for (m, n), src in bound.items()
                       if not n.startswith("_") and (n in exported.get(m, ()) or (m, n) in taken))
    private = sorted((i, m, n) for i, m, n in uses
                     if i in mods and i != m and n.startswith("_") and not n.startswith("__"))
    return reexports, private


def test_no_name_is_importable_from_two_modules():
    """A public name is imported from the module that defines it: no module of minimal re-exports another's."""
    reexports, _ = _addresses()
    assert [r for r in reexports if r[:2] not in ALLOWED_REEXPORTS] == []
    assert sorted(ALLOWED_REEXPORTS) == sorted(r[:2] for r in reexports if r[:2] in ALLOWED_REEXPORTS)   # none stale


def test_no_module_takes_a_private_name_from_another():
    """What one module of minimal needs from another is public there (tests may still reach private helpers)."""
    _, private = _addresses()
    assert [p for p in private if p not in ALLOWED_PRIVATE] == []
    assert sorted(ALLOWED_PRIVATE) == sorted(p for p in private if p in ALLOWED_PRIVATE)


def test_the_address_checks_see_a_re_export_and_a_private_import(tmp_path, monkeypatch):
    """The two checks above can fail: a package whose b.py re-exports a.f (in __all__) and takes a._g is caught."""
    pkg = tmp_path / "minimal"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("def f():\n    pass\n\n\ndef _g():\n    pass\n")
    (pkg / "b.py").write_text("from .a import _g, f\n\n__all__ = ['f']\n")
    monkeypatch.setattr(__import__(__name__), "ROOT", tmp_path)
    assert _addresses() == ([("minimal.b", "f", "minimal.a")], [("minimal.b", "minimal.a", "_g")])


if __name__ == "__main__":
    reexports, private = _addresses()
    print(f"names importable from two modules (re-exports): {len(reexports)}")
    for r in reexports:
        print("   ", *r)
    print(f"private names imported across modules of minimal: {len(private)}")
    for p in private:
        print("   ", *p)
    outside = {u for u in _uses(_sources(), _modules()) if not u[0].startswith("minimal")
               and u[2].startswith("_") and not u[2].startswith("__")}
    print(f"private names tests, bench and notebooks reach (not checked): {len(outside)}")
