"""What a stored column is beyond its Python type, said where the column is declared.

Every table is declared once, as a frozen dataclass whose fields are its columns in order
(``store/storage/tables.py``; the columns a view shows as they are stored are the view's base in
``store/views.py``). A field's type says the column's kind — ``int``, ``float``, ``str``, ``bool``,
``bytes``; ``| None`` when it may be NULL — and an ``Annotated`` marker says the rest::

    key: Annotated[str, Char(200)]                     # VARCHAR(200) NOT NULL
    status: Annotated[str, Char(16, "pending")]        # … with a default
    inputs: Annotated[JsonValue, Json(dict)]           # JSON text, a new row's value {}
    task_id: Annotated[str, Ref("task", "task_id")]    # references task(task_id), deleted with it
    id: Annotated[int, AUTO]                           # the integer primary key

From these the Peewee models (the DDL), the JSON and boolean columns the SQL layer decodes, the
SELECT lists of the rows read into these classes and the columns a migration adds are derived
(``store/storage/models.py``, ``sql.py``, ``schema.py``): adding a column is its one field here
plus its migration.
"""

from __future__ import annotations

from dataclasses import dataclass


class _NoDefault:
    def __repr__(self) -> str:
        return "NO_DEFAULT"


NO_DEFAULT = _NoDefault()


@dataclass(frozen=True)
class Column:
    """A column's storage: ``width`` (VARCHAR), ``default`` (a new row's value, in the DDL of a
    column a migration adds), ``big`` (64-bit), ``key`` / ``auto`` (the primary key), ``json``
    (canonical JSON text, decoded when read), ``ref`` (a foreign key, deleted with its row),
    ``index`` (an index of its own)."""

    width: int | None = None
    default: object = NO_DEFAULT
    big: bool = False
    key: bool = False
    auto: bool = False
    json: bool = False
    ref: tuple[str, str] | None = None
    index: bool = False


def Char(width: int, default: object = NO_DEFAULT, *, key: bool = False) -> Column:  # noqa: N802
    """VARCHAR(width)."""
    return Column(width=width, default=default, key=key)


def Default(value: object) -> Column:  # noqa: N802
    """A plain column with a default."""
    return Column(default=value)


def Json(default: object = NO_DEFAULT) -> Column:  # noqa: N802
    """Canonical JSON text (``dict`` / ``list``: a new row's value is an empty one)."""
    return Column(json=True, default=default)


def Ref(table: str, column: str = "id", *, width: int | None = None) -> Column:  # noqa: N802
    """A reference to ``table(column)``, deleted with the row it references."""
    return Column(ref=(table, column), width=width)


BIG = Column(big=True)
AUTO = Column(key=True, auto=True)
BIG_AUTO = Column(key=True, auto=True, big=True)

__all__ = ["AUTO", "BIG", "BIG_AUTO", "NO_DEFAULT", "Char", "Column", "Default", "Json", "Ref"]
