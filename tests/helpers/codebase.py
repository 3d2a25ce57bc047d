"""The package's source read as data: its modules, their imports and layers, comparisons against a
knowledge graph's name, lab-notebook mentions. Shared by tests/test_codebase.py (the rules) and
benchmarks/code_metrics.py (the figures)."""

from __future__ import annotations

import ast
import io
import re
import tokenize
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PACKAGE = REPO / "saga_dspy"

# Layers import only downward (docs/CONTRACTS.md). Leaves import only leaves; every layer may read them.
LEAVES = frozenset({"config", "variants", "errors", "cli", "input_files", "terminal_text"})
LAYERS: tuple[tuple[str, ...], ...] = (
    ("kg",),
    ("schema",),
    ("services",),
    ("grounding",),
    ("proposer",),
    ("tools",),
    ("agent", "lm", "signatures"),
    ("eval",),
    ("optimize",),
    ("stats", "ask", "__main__", "__init__"),
)
# Inside a package cut into subpackages, the same rule one level down: its parts import only downward. A part is a
# subpackage or a module at the package's root; every part is named here, lowest first.
INNER_LAYERS: dict[str, tuple[tuple[str, ...], ...]] = {
    "eval": (
        ("errors",),
        ("files", "preflight"),
        ("scoring",),
        ("loading",),
        ("stats",),
        ("tracking",),
        ("running",),
        ("reports",),
        ("__main__", "__init__"),
    ),
}
KG_NAMES = frozenset({"wikidata", "freebase"})
# where a knowledge graph's name may be compared: the flavours (what differs between KGs) and the settings
KG_NAME_HOMES = ("kg/flavours/", "config.py")
# a Wikidata id in a string: P31, Q5, wdt:P279, "wd:Q42 wdt:P19" (its flavour's data, not code's)
ID_LITERAL = re.compile(r"(?<![A-Za-z0-9_])[PQ][1-9]\d*(?![A-Za-z0-9_])")
ID_HOMES = ("kg/flavours/",)
NOTEBOOK = re.compile(
    r"\b(session|issue)s?\s*#?\d+|small[- ]models?\b|\b1\.5B\b(?!-Instruct)|\bF1\b[^.\n]{0,12}?\d\.\d",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class Module:
    path: Path
    name: str  # dotted, e.g. saga_dspy.kg.endpoint
    text: str
    tree: ast.Module

    @property
    def rel(self) -> str:
        """The path inside its package directory (the last `saga_dspy` in the path), e.g. kg/endpoint.py: the
        same for any checkout measured."""
        parts = self.path.parts
        top = len(parts) - 1 - parts[::-1].index(PACKAGE.name)
        return "/".join(parts[top + 1 :])

    @property
    def lines(self) -> int:
        return len(self.text.splitlines())


def modules(package: Path = PACKAGE) -> list[Module]:
    out = []
    for path in sorted(package.rglob("*.py")):
        rel = path.relative_to(package.parent).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] == "__init__" and len(parts) > 2:
            parts = parts[:-1]
        text = path.read_text(encoding="utf-8")
        out.append(Module(path, ".".join(parts), text, ast.parse(text, filename=str(path))))
    return out


def layer_of(name: str) -> int:
    """-1 for a leaf, else the layer's rank (higher imports lower)."""
    parts = name.split(".")
    head = parts[1] if len(parts) > 1 else "__init__"
    if head in LEAVES:
        return -1
    for rank, layer in enumerate(LAYERS):
        if head in layer:
            return rank
    raise KeyError(f"{name}: no layer (add it to LAYERS in tests/helpers/codebase.py)")


def _is_package(module: Module) -> bool:
    return module.path.name == "__init__.py"


def _imported(module: Module) -> Iterator[tuple[int, str, tuple[str, ...]]]:
    """(line, dotted module, names taken from it) of every project import, anywhere in the module."""
    for node in ast.walk(module.tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("saga_dspy"):
                    yield node.lineno, alias.name, ()
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.name.split(".")
                if not _is_package(module):
                    base = base[:-1]
                base = base[: len(base) - (node.level - 1)]
                target = ".".join([*base, node.module] if node.module else base)
            else:
                target = node.module or ""
            if target.startswith("saga_dspy"):
                yield node.lineno, target, tuple(alias.name for alias in node.names)


def imports(module: Module) -> Iterator[tuple[int, str]]:
    """(line, dotted module) of every project import, anywhere in the module (lazy ones too)."""
    for line, target, _names in _imported(module):
        yield line, target


def import_graph(mods: list[Module] | None = None) -> dict[str, dict[str, int]]:
    """module -> {project module it imports: the line}, every import counted (lazy and TYPE_CHECKING ones too);
    `from pkg import name` is an import of `pkg.name` when that is a module, and `saga_dspy` is its `__init__`."""
    mods = mods if mods is not None else modules()
    known = {m.name for m in mods}

    def resolve(target: str) -> str | None:
        if target in known:
            return target
        return target + ".__init__" if target + ".__init__" in known else None

    graph: dict[str, dict[str, int]] = {}
    for module in mods:
        edges = graph.setdefault(module.name, {})
        for line, target, names in _imported(module):
            subs = [resolve(f"{target}.{name}") for name in names]
            found = [sub for sub in subs if sub] if subs and all(subs) else [resolve(target), *subs]
            for name in found:
                if name is not None and name != module.name:
                    edges.setdefault(name, line)
    return graph


def _strong_components(graph: dict[str, dict[str, int]]) -> list[list[str]]:
    """The strongly connected components of more than one node (Tarjan), each sorted, in name order."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph.get(node, {})):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(out)


def _shortest_cycle(graph: dict[str, dict[str, int]], start: str, within: set[str]) -> list[str]:
    """The shortest path from `start` back to itself inside `within` (breadth first)."""
    parent: dict[str, str] = {}
    queue = [start]
    while queue:
        node = queue.pop(0)
        for nxt in sorted(graph.get(node, {})):
            if nxt not in within or nxt in parent:
                continue
            parent[nxt] = node
            if nxt == start:
                path = [start]
                while path[-1] != start or len(path) == 1:
                    path.append(parent[path[-1]])
                return path[::-1]
            queue.append(nxt)
    return [start]


def import_cycles(mods: list[Module] | None = None, *, by_package: bool = False) -> list[str]:
    """Each import circle, named by the path around it: `a.py:12 -> b.py:3 -> a.py` (the line of each import),
    with the other members of its tangle when there are more. `by_package`: circles between the top-level
    packages and leaves (kg, schema, agent, lm, config, ...), each step named by one import that makes it."""
    mods = mods if mods is not None else modules()
    rel = {m.name: m.rel for m in mods}
    graph = import_graph(mods)
    if by_package:
        where: dict[str, dict[str, str]] = {}
        for source, edges in graph.items():
            for target, line in edges.items():
                a, b = _package_of(source), _package_of(target)
                if a != b:
                    where.setdefault(a, {}).setdefault(b, f"{rel[source]}:{line}")
        graph = {a: {b: 0 for b in edges} for a, edges in where.items()}
    name = {a: a for a in graph} if by_package else rel
    out = []
    for component in _strong_components(graph):
        cycle = _shortest_cycle(graph, component[0], set(component))
        if by_package:
            steps = [f"{a} ({where[a][b]})" for a, b in zip(cycle, cycle[1:], strict=False)]
        else:
            steps = [f"{rel[a]}:{graph[a][b]}" for a, b in zip(cycle, cycle[1:], strict=False)]
        text = " -> ".join([*steps, name[cycle[-1]]])
        others = sorted(name[n] for n in set(component) - set(cycle))
        out.append(text + (f" (tangled with {', '.join(others)})" if others else ""))
    return out


def _package_of(name: str) -> str:
    """The top-level package or leaf module a module belongs to (`saga_dspy.kg.base` -> kg)."""
    parts = name.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def upward_imports(mods: list[Module] | None = None) -> list[str]:
    """`module:line -> target` for each import of a higher layer (or of a non-leaf by a leaf)."""
    out = []
    for module in mods if mods is not None else modules():
        own = layer_of(module.name)
        for line, target in imports(module):
            theirs = layer_of(target)
            if target == "saga_dspy" or theirs == -1:
                continue
            if own == -1 or theirs > own:
                out.append(f"{module.rel}:{line} -> {target}")
    return out


def inner_layer_of(name: str) -> tuple[str, int] | None:
    """(package, rank of the part inside it) for a module of a package in INNER_LAYERS, else None;
    `saga_dspy.eval.loading.gold` -> ("eval", rank of loading), `saga_dspy.eval` -> ("eval", rank of __init__)."""
    parts = name.split(".")
    if len(parts) < 2 or parts[1] not in INNER_LAYERS:
        return None
    part = parts[2] if len(parts) > 2 else "__init__"
    for rank, layer in enumerate(INNER_LAYERS[parts[1]]):
        if part in layer:
            return parts[1], rank
    raise KeyError(f"{name}: no layer inside {parts[1]} (add it to INNER_LAYERS in tests/helpers/codebase.py)")


def inner_upward_imports(mods: list[Module] | None = None) -> list[str]:
    """`module:line -> target` for each import, inside a package of INNER_LAYERS, of a part above the importer's
    own (lazy and TYPE_CHECKING imports too; `from pkg import module` counts as an import of the module). Parts of
    one rank may import each other; the cycle rule keeps them from going round."""
    mods = mods if mods is not None else modules()
    rel = {m.name: m.rel for m in mods}
    out = []
    for source, edges in import_graph(mods).items():
        own = inner_layer_of(source)
        if own is None:
            continue
        for target, line in sorted(edges.items(), key=lambda edge: edge[1]):
            theirs = inner_layer_of(target)
            if theirs is not None and theirs[0] == own[0] and theirs[1] > own[1]:
                out.append(f"{rel[source]}:{line} -> {target}")
    return sorted(out)


def _is_kg_name(node: ast.AST) -> bool:
    if isinstance(node, ast.Constant):
        return isinstance(node.value, str) and node.value.lower() in KG_NAMES
    if isinstance(node, ast.Tuple | ast.List | ast.Set):
        return any(_is_kg_name(e) for e in node.elts)
    return False


def kg_name_comparisons(mods: list[Module] | None = None, *, homes: tuple[str, ...] = KG_NAME_HOMES) -> list[str]:
    """`module:line` of each comparison (==, !=, in, match) against "wikidata"/"freebase" outside `homes`."""
    out = []
    for module in mods if mods is not None else modules():
        if any(module.rel.startswith(home) for home in homes):
            continue
        lines = set()
        for node in ast.walk(module.tree):
            if isinstance(node, ast.Compare) and any(_is_kg_name(n) for n in (node.left, *node.comparators)):
                lines.add(node.lineno)
            elif isinstance(node, ast.MatchValue) and _is_kg_name(node.value):
                lines.add(node.lineno)
        out.extend(f"{module.rel}:{line}" for line in sorted(lines))
    return out


def kg_name_defaults(mods: list[Module] | None = None, *, homes: tuple[str, ...] = KG_NAME_HOMES) -> list[str]:
    """`module:line` of each argument whose default is a knowledge graph's name ("wikidata") outside `homes`: the
    default is `config.DEFAULT_KG`."""
    out = []
    for module in mods if mods is not None else modules():
        if any(module.rel.startswith(home) for home in homes):
            continue
        for node in ast.walk(module.tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
                defaults = [*node.args.defaults, *(d for d in node.args.kw_defaults if d is not None)]
                out.extend(f"{module.rel}:{d.lineno}" for d in defaults if _is_kg_name(d))
    return sorted(out)


def id_literals(mods: list[Module] | None = None, *, homes: tuple[str, ...] = ID_HOMES) -> list[str]:
    """`module:line: ids` of each string literal (f-string parts too; docstrings are prose) naming a Wikidata
    property or item id outside `homes`."""
    out = []
    for module in mods if mods is not None else modules():
        if any(module.rel.startswith(home) for home in homes):
            continue
        docs = {id(doc) for doc in _docstrings(module.tree)}
        found: dict[int, list[str]] = {}
        for node in ast.walk(module.tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs:
                ids = ID_LITERAL.findall(node.value)
                if ids:
                    found.setdefault(node.lineno, []).extend(ids)
        out.extend(f"{module.rel}:{line}: {', '.join(dict.fromkeys(ids))}" for line, ids in sorted(found.items()))
    return out


def _docstrings(tree: ast.Module) -> Iterator[ast.Constant]:
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                if isinstance(first.value.value, str):
                    yield first.value


def notebook_mentions(mods: list[Module] | None = None) -> list[str]:
    """`module:line: text` of each session / issue number, small-model aside or F1 figure in a comment or
    docstring."""
    out = []
    for module in mods if mods is not None else modules():
        found: list[tuple[int, str]] = []
        for doc in _docstrings(module.tree):
            for offset, line in enumerate(str(doc.value).splitlines()):
                if NOTEBOOK.search(line):
                    found.append((doc.lineno + offset, line.strip()))
        for token in tokenize.generate_tokens(io.StringIO(module.text).readline):
            if token.type == tokenize.COMMENT and NOTEBOOK.search(token.string):
                found.append((token.start[0], token.string.strip()))
        out.extend(f"{module.rel}:{line}: {text}" for line, text in sorted(found))
    return out


def functions(module: Module) -> Iterator[tuple[str, int]]:
    """(qualified name, lines) of every function and method."""

    def walk(node: ast.AST, prefix: str) -> Iterator[tuple[str, int]]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                name = f"{prefix}{child.name}"
                yield name, (child.end_lineno or child.lineno) - child.lineno + 1
                yield from walk(child, name + ".")
            elif isinstance(child, ast.ClassDef):
                yield from walk(child, f"{prefix}{child.name}.")
            else:
                yield from walk(child, prefix)

    yield from walk(module.tree, "")


def long_functions(mods: list[Module], limit: int) -> list[str]:
    """`module:function (lines)` of every function and method over `limit` lines, sorted."""
    return sorted(f"{m.rel}:{name} ({lines})" for m in mods for name, lines in functions(m) if lines > limit)


def names(module: Module, word: str) -> int:
    """How often `word` stands as a name in the code (not in comments or strings)."""
    return sum(
        1
        for token in tokenize.generate_tokens(io.StringIO(module.text).readline)
        if token.type == tokenize.NAME and token.string == word
    )


def if_keywords(module: Module) -> int:
    """`if` and `elif` keywords in the code (statements, conditional expressions, comprehension filters)."""
    return names(module, "if") + names(module, "elif")
