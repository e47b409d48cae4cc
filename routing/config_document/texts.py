"""The document as text: an export's YAML, and a file or body read back into a document."""

from __future__ import annotations

from typing import Any

from routing.config_document.located import dump_yaml, load_yaml
from routing.config_document.paths import NO_LINES, Lines
from routing.config_document.reading import document_export
from routing.config_document.schema import Document, document_read


def export_yaml() -> str:
    """The configuration as YAML, stable from one export to the next."""
    return dump_yaml(document_export())


def document_from_yaml(text: str) -> tuple[Document, Lines]:
    """A YAML file's document and its lines; ``ConfigError`` names line and field."""
    raw, lines = load_yaml(text)
    return document_read(raw, lines), lines


def document_from_data(raw: Any) -> tuple[Document, Lines]:
    """A parsed JSON body's document (its errors name the field only)."""
    return document_read(raw, NO_LINES), NO_LINES
