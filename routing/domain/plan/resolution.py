"""From a combo's declared steps to concrete ``provider/model`` leaves (pure).

A combo step is ``provider/model``, ``provider/<glob>`` or a reference to another combo.
This module flattens them, in declared order, into leaves that name one
provider and one model each; planning then expands every leaf to the connections serving it.

- **Nested combos.** A referenced combo's steps stand in the referencing step's place, and
  its leaves keep that outer step's index, so the outer step's weight and flags apply to
  them (the nested combo's own strategy and weights do not). Nesting is limited to
  ``MAX_COMBO_DEPTH`` combos on one path (the requested combo included); a reference deeper
  than that, a reference to a combo already on the path (a cycle), and a reference to an
  inactive or missing combo (absent from the snapshot) contribute nothing.
- **Provider wildcards.** A model with ``*`` (any run of characters) or ``?`` (any one
  character) matches, case-sensitively, the provider's known model names: first the models its
  active connections declare (by connection priority, each name once), then the model
  catalog's entries for the provider not declared by any connection, sorted by name. Nothing
  else is special (``[`` is a plain character), so the order is stable across requests.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from routing.domain.config.snapshot import ComboInfo, ComboStep, ConfigSnapshot

MAX_COMBO_DEPTH = 3
_GLOB_CHARACTERS = frozenset("*?")


@dataclass(frozen=True, slots=True)
class Leaf:
    """One concrete model at one provider, from the requested combo's step ``step``."""

    step: int
    provider: str
    model: str
    connection_id: int | None = None  # the step's pinned connection, if any


def combo_leaves(snapshot: ConfigSnapshot, combo: ComboInfo) -> list[Leaf]:
    """``combo``'s leaves in declared order, nested combos and wildcards expanded."""
    path = (combo.name,)
    return [
        leaf
        for index, step in enumerate(combo.steps)
        for leaf in _step_leaves(snapshot, step, index, path)
    ]


def _step_leaves(
    snapshot: ConfigSnapshot, step: ComboStep, index: int, path: tuple[str, ...]
) -> list[Leaf]:
    if step.combo_ref is not None:
        return _nested_leaves(snapshot, step.combo_ref, index, path)
    models = step_models(snapshot, step.provider, step.model)
    return [Leaf(index, step.provider, model, step.connection_id) for model in models]


def _nested_leaves(
    snapshot: ConfigSnapshot, name: str, index: int, path: tuple[str, ...]
) -> list[Leaf]:
    nested = snapshot.combos.get(name)  # the snapshot holds active combos only
    if nested is None or name in path or len(path) >= MAX_COMBO_DEPTH:
        return []
    deeper = (*path, name)
    return [leaf for step in nested.steps for leaf in _step_leaves(snapshot, step, index, deeper)]


def step_models(snapshot: ConfigSnapshot, provider: str, model: str) -> list[str]:
    """The models a step names: ``model`` itself, or the known models a glob matches."""
    if not is_glob(model):
        return [model]
    pattern = _glob_pattern(model)
    return [name for name in known_models(snapshot, provider) if pattern.match(name)]


def known_models(snapshot: ConfigSnapshot, provider: str) -> list[str]:
    """The provider's model names a wildcard can match, in the stable order described above."""
    served = dict.fromkeys(
        model
        for connection in snapshot.connections_for(provider)
        for model in connection.served_models
    )
    catalog = sorted(m for p, m in snapshot.catalog if p == provider and m not in served)
    return [*served, *catalog]


def is_glob(model: str) -> bool:
    """Whether a step's model is a wildcard pattern."""
    return not _GLOB_CHARACTERS.isdisjoint(model)


@lru_cache(maxsize=256)
def _glob_pattern(glob: str) -> re.Pattern[str]:
    parts = (".*" if c == "*" else "." if c == "?" else re.escape(c) for c in glob)
    return re.compile("".join(parts) + r"\Z", re.DOTALL)
