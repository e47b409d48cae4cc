"""YAML in and out: the document with the line of every value, and the stable text.

Loading goes through PyYAML's node graph, whose marks give each key's line, so an error can
name the line and the field. Dumping writes keys in the schema's order, free-form mappings
sorted, so two exports of the same configuration are byte-identical.
"""

from __future__ import annotations

from typing import Any

import yaml

from omniroute.core.bounds import DEFAULT_MAX_JSON_DEPTH, nesting_exceeds
from routing.config_document.errors import ConfigError, Problem
from routing.config_document.paths import Lines, Path

TOO_DEEP = f"nested more than {DEFAULT_MAX_JSON_DEPTH} levels deep"


def load_yaml(text: str) -> tuple[Any, Lines]:
    """The document in ``text`` and the line of each of its values; ``ConfigError`` naming the
    line when the text is not YAML, or when it nests deeper than any document does."""
    try:
        return _load_yaml(text)
    except RecursionError:  # PyYAML composes nodes recursively
        raise ConfigError([Problem("", TOO_DEEP)]) from None


def _load_yaml(text: str) -> tuple[Any, Lines]:
    loader = yaml.SafeLoader(text)
    try:
        node = loader.get_single_node()
        data = loader.construct_document(node) if node is not None else None
    except yaml.MarkedYAMLError as error:
        mark = error.problem_mark or error.context_mark
        line = mark.line + 1 if mark is not None else None
        raise ConfigError([Problem("", f"not valid YAML: {error.problem}", line)]) from error
    except yaml.YAMLError as error:
        raise ConfigError([Problem("", f"not valid YAML: {error}")]) from error
    except ValueError as error:  # a scalar PyYAML cannot build: 2024-02-30, 5 000 digits
        raise ConfigError([Problem("", f"not valid YAML: {error}")]) from None
    finally:
        loader.dispose()
    if nesting_exceeds(data, DEFAULT_MAX_JSON_DEPTH):
        raise ConfigError([Problem("", TOO_DEEP)])
    lines: dict[Path, int] = {}
    if node is not None:
        _walk(node, (), lines)
    return data, Lines(lines)


def _walk(node: yaml.Node, path: Path, lines: dict[Path, int]) -> None:
    lines.setdefault(path, node.start_mark.line + 1)
    if isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            name = key.value if isinstance(key, yaml.ScalarNode) else str(key.start_mark)
            lines[(*path, name)] = key.start_mark.line + 1
            _walk(value, (*path, name), lines)
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            _walk(item, (*path, index), lines)


class _Dumper(yaml.SafeDumper):
    """Lists indented under their key, which reads better in a diff."""

    def increase_indent(self, flow: bool = False, indentless: bool = False) -> None:
        super().increase_indent(flow, False)


def dump_yaml(document: Any) -> str:
    """``document`` as YAML, keys in the order given (the caller sorts what must be sorted)."""
    return yaml.dump(
        document,
        Dumper=_Dumper,
        sort_keys=False,
        allow_unicode=True,
        default_flow_style=False,
        width=100,
    )
