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
LEAVES = frozenset({"config", "variants", "errors", "cli", "input_files"})
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
KG_NAMES = frozenset({"wikidata", "freebase"})
# where a knowledge graph's name may be compared: the flavours (what differs between KGs) and the settings
KG_NAME_HOMES = ("kg/flavours/", "config.py")
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


def imports(module: Module) -> Iterator[tuple[int, str]]:
    """(line, dotted module) of every project import, anywhere in the module (lazy ones too)."""
    for node in ast.walk(module.tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("saga_dspy"):
                    yield node.lineno, alias.name
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
                yield node.lineno, target


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
