"""ORM instances from the driver's rows (services.shared.driver), made as
SQLAlchemy makes them when it loads a row: no validation, the values in the
instance's ``__dict__`` and the identity key set, so callers get the same
detached model (its attributes settable, ``model_dump`` and ``session.merge``
working) as from a session.

``Model.model_construct`` is not enough for table models: it leaves out
SQLAlchemy's instance state, and setting an attribute then fails."""

from __future__ import annotations

from typing import Any, Generic, TypeVar

from sqlalchemy import Table, inspect
from sqlalchemy.orm import Mapper, configure_mappers
from sqlalchemy.orm.attributes import instance_state

from services.shared.driver import Driver, Row, columns

M = TypeVar("M")


class Loader(Generic[M]):
    """Rows of ``model``'s table (all its columns, or ``names``) as
    ``model`` instances. ``select`` lists the columns for a SELECT, each
    prefixed with ``alias.`` when given."""

    def __init__(self, driver: Driver, model: type[M], names: str = "", alias: str = "") -> None:
        configure_mappers()  # the instrumentation new instances need
        mapper: Mapper[Any] = inspect(model)
        table = mapper.local_table
        assert isinstance(table, Table)
        chosen = columns(table, names) if names else list(table.columns)
        self.names = tuple(column.name for column in chosen)
        self.columns = dict(zip(self.names, chosen, strict=True))
        prefix = f"{alias}." if alias else ""
        self.select = ", ".join(prefix + name for name in self.names)
        self.width = len(chosen)
        self._model = model
        self._new = mapper.class_manager.new_instance
        self._read = driver.reader(*chosen)
        keys = [column.name for column in mapper.primary_key]
        self._key = [self.names.index(name) for name in keys]

    def __call__(self, row: Row) -> M:
        """The instance of ``row``'s first ``width`` values."""
        values = self._read(row[: self.width])
        instance = self._new()
        instance.__dict__.update(zip(self.names, values, strict=True))
        # Detached, as a row loaded by a session that has closed.
        instance_state(instance).key = (self._model, tuple(values[i] for i in self._key), None)
        return instance  # type: ignore[no-any-return]
