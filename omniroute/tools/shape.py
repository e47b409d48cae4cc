"""Shape figures of the repository: lines per app, long files and functions, ``# fmt: skip``
lines, comments citing documents outside the repository, import cycles and the spread of
``AttemptContext``. Standard library only; reads the source with ``ast`` and ``tokenize``, so
no module has to be importable.

``python -m omniroute.tools.shape [ROOT]`` prints the report for the checkout at ROOT (the
current directory by default). The walk, the import parsing, the module graph and the strongly
connected components are plain functions, for the layer tests to reuse."""

from __future__ import annotations

import ast
import io
import re
import sys
import tokenize
from collections import Counter
from collections.abc import Container, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TypeGuard

TREES = ("omniroute", "resilience", "routing", "leases", "tests")
SKIPPED_DIRS = frozenset({"migrations", "__pycache__"})
# Parts of the code base, most specific first: a module belongs to the first that prefixes it.
PARTS = (
    ("omniroute/core", "omniroute.core"),
    ("omniroute/tools", "omniroute.tools"),
    ("rest of omniroute", "omniroute"),
    ("resilience", "resilience"),
    ("routing/proxy", "routing.proxy"),
    ("routing/strategies", "routing.strategies"),
    ("rest of routing", "routing"),
    ("leases", "leases"),
    ("tests", "tests"),
)
NOT_PRODUCT = frozenset({"omniroute/tools", "tests"})
LONG_FILE = 300
LONG_FUNCTION = 40
CITATION = re.compile(
    r"§|reference-part|\bspec\b|\bdecisions? \d+|ARCHITECTURE\.md|STYLE\.md", re.IGNORECASE
)
DOCS_PATH = re.compile(r"\bdocs/\w")
FMT_SKIP = re.compile(r"#\s*fmt:\s*skip\b")
FIELD = re.compile(r"\{[^{}\n]*\}")
TEXT_TOKENS = frozenset({tokenize.COMMENT, tokenize.STRING})


@dataclass(frozen=True)
class Source:
    """One walked ``.py`` file: its path, its path relative to the root, its module name."""

    path: Path
    relative: str
    module: str

    @property
    def part(self) -> str:
        return part_of(self.module)

    @property
    def product(self) -> bool:
        return self.part not in NOT_PRODUCT


# The walk


def iter_sources(
    root: Path, trees: Iterable[str] = TREES, skipped: frozenset[str] = SKIPPED_DIRS
) -> list[Source]:
    """Every ``.py`` file under the given trees of ``root`` (``a`` or ``a/b``), sorted, leaving
    out the ``skipped`` directories (``migrations/``, ``__pycache__``) and hidden ones."""
    found = {
        source_of(path, root)
        for tree in trees
        if (root / tree).is_dir()
        for path in (root / tree).rglob("*.py")
        if walked(path.relative_to(root), skipped)
    }
    return sorted(found, key=lambda source: source.relative)


def walked(relative: Path, skipped: frozenset[str] = SKIPPED_DIRS) -> bool:
    """Whether a path (relative to the root) is one the walk counts."""
    folders = relative.parts[:-1]
    return not any(part in skipped or part.startswith(".") for part in folders)


def source_of(path: Path, root: Path) -> Source:
    relative = path.relative_to(root)
    return Source(path, relative.as_posix(), module_name(relative))


def module_name(relative: Path) -> str:
    """``a/b/c.py`` → ``a.b.c``; ``a/b/__init__.py`` → ``a.b``."""
    parts = list(relative.with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def part_of(module: str) -> str:
    """The part (see ``PARTS``) a module belongs to; ``other`` when none prefixes it."""
    for label, prefix in PARTS:
        if module == prefix or module.startswith(prefix + "."):
            return label
    return "other"


def parse(source: Source) -> ast.Module:
    return ast.parse(source.path.read_text(encoding="utf-8"), filename=str(source.path))


def line_count(source: Source) -> int:
    return len(source.path.read_text(encoding="utf-8").splitlines())


# Imports


def is_type_checking(node: ast.AST) -> TypeGuard[ast.If]:
    """Whether ``node`` is an ``if TYPE_CHECKING:`` (or ``typing.TYPE_CHECKING``) statement."""
    if not isinstance(node, ast.If):
        return False
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def module_level_imports(tree: ast.AST) -> Iterator[ast.Import | ast.ImportFrom]:
    """The import statements that run when the module is imported: not those inside functions
    or lambdas, nor in the body of an ``if TYPE_CHECKING:`` (its ``else`` does run)."""
    pending = [tree]
    while pending:
        for child in _runtime_children(pending.pop()):
            if isinstance(child, ast.Import | ast.ImportFrom):
                yield child
            elif not isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
                pending.append(child)


def _runtime_children(node: ast.AST) -> list[ast.AST]:
    """The child nodes that run with ``node``: only the ``else`` of a ``TYPE_CHECKING`` test."""
    return list(node.orelse) if is_type_checking(node) else list(ast.iter_child_nodes(node))


def package_of(source: Source) -> list[str]:
    """The package a module's relative imports resolve against."""
    return list(Path(source.relative).parent.parts)


def absolute_from(node: ast.ImportFrom, package: list[str]) -> str:
    """The module a ``from ... import`` names, a relative one resolved against ``package``."""
    base = package[: len(package) - node.level + 1] if node.level else []
    return ".".join([*base, *([node.module] if node.module else [])])


def import_targets(node: ast.Import | ast.ImportFrom, package: list[str]) -> Iterator[str]:
    """The candidate module names one import statement names: ``import a.b`` → ``a.b``;
    ``from p import n`` → ``p.n`` then ``p`` (``resolve`` picks the one that is a module)."""
    if isinstance(node, ast.Import):
        yield from (alias.name for alias in node.names)
        return
    base = absolute_from(node, package)
    for alias in node.names:
        yield f"{base}.{alias.name}" if base else alias.name
    yield base


def resolve(name: str, modules: Container[str]) -> str | None:
    """The project module ``name`` is or lives in: the longest known prefix, else None."""
    parts = name.split(".")
    for end in range(len(parts), 0, -1):
        if (candidate := ".".join(parts[:end])) in modules:
            return candidate
    return None


def every_import(tree: ast.AST) -> Iterator[ast.Import | ast.ImportFrom]:
    """Every import statement, wherever it stands: inside functions and ``TYPE_CHECKING``
    blocks too (the imports a reader follows, not only those that run at import time)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node


def edges_of(
    source: Source, tree: ast.AST, modules: frozenset[str], *, every: bool = False
) -> set[str]:
    """The project modules ``source`` imports at module level, or anywhere with ``every``
    (itself left out)."""
    package = package_of(source)
    found: set[str] = set()
    for node in every_import(tree) if every else module_level_imports(tree):
        found.update(_resolved(node, package, modules))
    found.discard(source.module)
    return found


def _resolved(
    node: ast.Import | ast.ImportFrom, package: list[str], modules: frozenset[str]
) -> set[str]:
    """One statement's targets: for ``from p import a, b`` each name that is a module, and
    ``p`` itself when some name is not (then it is an attribute of ``p``)."""
    if isinstance(node, ast.Import):
        return {m for name in import_targets(node, package) if (m := resolve(name, modules))}
    *names, base = import_targets(node, package)
    found = {name for name in names if name in modules}
    if len(found) < len(names) and (owner := resolve(base, modules)):
        found.add(owner)
    return found


# The module graph and its cycles

Graph = dict[str, set[str]]


def module_graph(sources: Iterable[Source], *, every: bool = False) -> Graph:
    """Module → the project modules it imports at module level (anywhere, with ``every``)."""
    listed = list(sources)
    modules = frozenset(source.module for source in listed)
    return {
        source.module: edges_of(source, parse(source), modules, every=every) for source in listed
    }


def restricted(graph: Graph, keep: Iterable[str]) -> Graph:
    """The subgraph on the ``keep`` nodes."""
    kept = set(keep)
    return {node: graph[node] & kept for node in graph if node in kept}


def strongly_connected(graph: Graph) -> list[list[str]]:
    """Tarjan's strongly connected components, iteratively (no recursion limit); each sorted,
    the list sorted by first member."""
    state = _Tarjan(graph)
    for node in sorted(graph):
        if node not in state.index:
            state.visit(node)
    return sorted((sorted(component) for component in state.components), key=lambda c: c[0])


def cycles(graph: Graph) -> list[list[str]]:
    """The strongly connected components of more than one module: the import cycles."""
    return [component for component in strongly_connected(graph) if len(component) > 1]


class _Tarjan:
    """The bookkeeping of one run of Tarjan's algorithm."""

    def __init__(self, graph: Graph) -> None:
        self.graph = graph
        self.index: dict[str, int] = {}
        self.low: dict[str, int] = {}
        self.stack: list[str] = []
        self.on_stack: set[str] = set()
        self.components: list[list[str]] = []

    def visit(self, start: str) -> None:
        self._open(start)
        work: list[tuple[str, Iterator[str]]] = [(start, self._successors(start))]
        while work:
            node, successors = work[-1]
            child = next(successors, None)
            if child is None:
                work.pop()
                self._close(node, work[-1][0] if work else None)
            elif child not in self.index:
                self._open(child)
                work.append((child, self._successors(child)))
            elif child in self.on_stack:
                self.low[node] = min(self.low[node], self.index[child])

    def _successors(self, node: str) -> Iterator[str]:
        return iter(sorted(self.graph.get(node, set()) & self.graph.keys()))

    def _open(self, node: str) -> None:
        self.index[node] = self.low[node] = len(self.index)
        self.stack.append(node)
        self.on_stack.add(node)

    def _close(self, node: str, parent: str | None) -> None:
        if parent is not None:
            self.low[parent] = min(self.low[parent], self.low[node])
        if self.low[node] != self.index[node]:
            return
        component: list[str] = []
        while not component or component[-1] != node:
            component.append(self.stack.pop())
            self.on_stack.discard(component[-1])
        self.components.append(component)


# The other figures


def long_functions(source: Source, tree: ast.AST) -> list[tuple[int, str, int]]:
    """(line, name, length) of every function or method, nested ones too, over the limit."""
    return [
        (node.lineno, node.name, length)
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        and (length := (node.end_lineno or node.lineno) - node.lineno + 1) > LONG_FUNCTION
    ]


def fmt_skip_lines(source: Source) -> int:
    """Lines with a ``fmt: skip`` directive in a comment (mentions in strings do not count)."""
    return sum(
        1
        for token in _text_tokens(source)
        if token.type == tokenize.COMMENT and FMT_SKIP.search(token.string)
    )


def _text_tokens(source: Source) -> Iterator[tokenize.TokenInfo]:
    """The comment and string tokens of a module."""
    readline = io.StringIO(source.path.read_text(encoding="utf-8")).readline
    return (t for t in tokenize.generate_tokens(readline) if t.type in TEXT_TOKENS)


def prose(token: tokenize.TokenInfo) -> str:
    """A token's text, less the replacement fields of an f-string (code, not prose)."""
    prefix = token.string[: len(token.string) - len(token.string.lstrip("rRbBuUfF"))]
    return FIELD.sub("", token.string) if "f" in prefix.lower() else token.string


def text_by_line(source: Source) -> dict[int, str]:
    """Line → the comment and string text on it (a multi-line string spread over its lines)."""
    found: dict[int, list[str]] = {}
    for token in _text_tokens(source):
        for offset, piece in enumerate(prose(token).splitlines()):
            found.setdefault(token.start[0] + offset, []).append(piece)
    return {line: " ".join(pieces) for line, pieces in found.items()}


def citation_lines(source: Source) -> list[int]:
    """Lines whose comment or string text cites a document outside the repository: a
    ``docs/`` path of the repository is a citation inside it, and does not count."""
    return sorted(
        line
        for line, text in text_by_line(source).items()
        if CITATION.search(text) and not DOCS_PATH.search(text)
    )


def imports_name(tree: ast.AST, name: str) -> bool:
    """Whether any ``from ... import`` anywhere in the module (functions included) names it."""
    return any(
        isinstance(node, ast.ImportFrom) and any(alias.name == name for alias in node.names)
        for node in ast.walk(tree)
    )


# The report


def percent(part: int, whole: int) -> str:
    return f"{100 * part / whole:.1f} %" if whole else "-"


def section_lines(sources: list[Source], lines: Mapping[str, int]) -> list[str]:
    totals: Counter[str] = Counter()
    for source in sources:
        totals[source.part] += lines[source.relative]
    product = sum(n for part, n in totals.items() if part not in NOT_PRODUCT)
    out = ["a. Lines per part (share of product lines; product = all but tests, omniroute/tools)"]
    for label, _ in PARTS:
        share = "" if label in NOT_PRODUCT else f"  {percent(totals[label], product):>7}"
        out.append(f"   {label:<20} {totals[label]:>7}{share}")
    out.append(f"   {'product total':<20} {product:>7}")
    return out


def section_long_files(sources: list[Source], lines: Mapping[str, int]) -> list[str]:
    long = [s for s in sources if lines[s.relative] > LONG_FILE]
    product = [s for s in long if s.product]
    tests = [s for s in long if s.part == "tests"]
    out = [f"b. Files over {LONG_FILE} lines: product {len(product)}, tests {len(tests)}"]
    out += [f"   {lines[s.relative]:>5}  {s.relative}" for s in product]
    return out


def section_long_functions(sources: list[Source], trees: Mapping[str, ast.AST]) -> list[str]:
    found = [
        (source.relative, line, name, length)
        for source in sources
        if source.product
        for line, name, length in long_functions(source, trees[source.relative])
    ]
    out = [f"c. Functions over {LONG_FUNCTION} lines (product): {len(found)}"]
    out += [f"   {length:>4}  {path}:{line} {name}" for path, line, name, length in found]
    return out


def section_fmt_skip(sources: list[Source]) -> list[str]:
    return [f"d. '# fmt: skip' lines (all files): {sum(fmt_skip_lines(s) for s in sources)}"]


def section_citations(sources: list[Source]) -> list[str]:
    found = [
        f"{source.relative}:{line}"
        for source in sources
        if source.product or source.part == "tests"
        for line in citation_lines(source)
    ]
    out = [f"e. Lines citing documents outside the repository (product and tests): {len(found)}"]
    return out + [f"   {where}" for where in found]


def section_cycles(sources: list[Source]) -> list[str]:
    out: list[str] = []
    for every, kind in ((False, "module-level imports"), (True, "every import")):
        found = cycles(module_graph(sources, every=every))
        out.append(f"f. Import cycles ({kind}, all walked modules): {len(found)}")
        for number, component in enumerate(found, 1):
            out.append(f"   {number}. ({len(component)} modules) " + ", ".join(component))
    return out


def section_attempt_context(sources: list[Source], trees: Mapping[str, ast.AST]) -> list[str]:
    importing = [s for s in sources if imports_name(trees[s.relative], "AttemptContext")]
    product = sum(1 for s in importing if s.product)
    tests = sum(1 for s in importing if s.part == "tests")
    return [f"g. Modules importing AttemptContext: product {product}, tests {tests}"]


def main(root: Path) -> str:
    """The plain-text report for the repository at ``root``."""
    sources = iter_sources(root)
    lines = {source.relative: line_count(source) for source in sources}
    trees = {source.relative: parse(source) for source in sources}
    sections = [
        [f"Shape of {root} ({len(sources)} .py files, migrations left out)"],
        section_lines(sources, lines),
        section_long_files(sources, lines),
        section_long_functions(sources, trees),
        section_fmt_skip(sources),
        section_citations(sources),
        section_cycles(sources),
        section_attempt_context(sources, trees),
    ]
    return "\n\n".join("\n".join(section) for section in sections) + "\n"


if __name__ == "__main__":
    sys.stdout.write(main(Path(sys.argv[1] if len(sys.argv) > 1 else ".").resolve()))
