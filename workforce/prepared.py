"""Querysets compiled once and run again with new values: the wake's hot reads
(docs/architecture.md "A post end to end", steps 7 to 9).

A worker's turn reads a few rows through querysets whose compile (joins, annotations,
subqueries) cost more CPU than their round trip: the claimed delivery with what its
turn needs, the conversation's history window, an idempotency key's request. A
``Prepared`` builds its queryset once per database vendor, with sentinel values where
the call's values go, keeps the compiled SQL and what the ORM needs to turn a row into
instances (the converters, ``select_related`` populators, annotations), and on each
call sends that SQL with the sentinels replaced. The instances are the ones the
queryset would give. ``update_rows`` (and ``update_statement``, for a CTE) is the
same for the conditional UPDATEs a turn sends (a delivery noted and settled, a turn's
request settled unless cancelled). ``workforce.rows`` does the same for single-table
rows.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from typing import Any

from django.db import connection, models
from django.db.models import QuerySet

from .rows import concrete_field


@dataclass(frozen=True)
class _Compiled:
    sql: str
    params: tuple
    positions: tuple[tuple[int, ...], ...]  # where each value goes in params
    wraps: tuple  # per value: the int subclass the backend wraps it in (psycopg's Int8), or None
    converters: tuple  # ((position, (converter, ...), expression), ...)
    model_rows: bool
    model: Any = None
    init_list: tuple = ()
    start: int = 0
    end: int = 0
    populators: tuple = ()
    annotations: tuple = ()


class _Joined:
    """A ``select_related`` join's instance, made from its slice of a row and set on the
    instance it hangs from (what the queryset's own iteration does for a forward
    foreign key): None when the joined row is missing (a nullable key)."""

    def __init__(self, info: dict[str, Any], select: list[Any], db: str):
        fields = info["select_fields"]
        self.start, self.end = fields[0], fields[-1] + 1
        self.model = info["model"]
        self.names = tuple(column[0].target.attname for column in select[self.start : self.end])
        self.pk_index = self.names.index(self.model._meta.pk.attname)
        self.db = db
        self.local_setter = info["local_setter"]
        self.remote_setter = info["remote_setter"]
        self.joined = tuple(_Joined(inner, select, db) for inner in info.get("related_klass_infos", []))

    def populate(self, row: list[Any], parent: models.Model) -> None:
        values = row[self.start : self.end]
        obj = None
        if values[self.pk_index] is not None:
            obj = self.model.from_db(self.db, self.names, values)
            for joined in self.joined:
                joined.populate(row, obj)
        self.local_setter(parent, obj)
        if obj is not None:
            self.remote_setter(obj, parent)


def _same(param: Any, sentinel: Any) -> bool:
    """Whether a compiled query's ``param`` is ``sentinel``: the same type and value, or
    an int the backend wrapped in an int subclass of its own."""
    if type(param) is type(sentinel):
        return param == sentinel
    return type(sentinel) is int and isinstance(param, int) and not isinstance(param, bool) and param == sentinel


class Prepared:
    """``Prepared(build, sentinels)``: ``build(*values)`` returns the queryset for
    ``values``; it is called once per database vendor with ``sentinels`` (values that
    appear nowhere else in the compiled query's parameters, each at least once; none
    for a query that takes no values), and
    every later call sends the compiled SQL with the caller's values in their places.

    ``one(*values)`` answers the first row (a model instance for a model queryset, a
    tuple for ``values_list``), or None; ``all(*values)`` every row. The queryset must
    not depend on anything but ``values`` (no ``now()`` compiled into it).

    Raises:
        ValueError: at the first call, when a sentinel is missing from the parameters.
    """

    def __init__(self, build: Callable[..., QuerySet], sentinels: tuple):
        self._build = build
        self._sentinels = sentinels
        self._compiled: dict[str, _Compiled] = {}

    def _parts(self) -> _Compiled:
        vendor = connection.vendor
        compiled = self._compiled.get(vendor)
        if compiled is None:
            compiled = self._compiled[vendor] = self._compile()
        return compiled

    def _compile(self) -> _Compiled:
        queryset = self._build(*self._sentinels)
        compiler = queryset.query.get_compiler(using=queryset.db)
        sql, params = compiler.as_sql()
        params = tuple(params)
        positions = []
        wraps = []
        for sentinel in self._sentinels:
            found = tuple(i for i, p in enumerate(params) if _same(p, sentinel))
            if not found:
                raise ValueError(f"the sentinel {sentinel!r} is not among the compiled query's parameters")
            positions.append(found)
            # A BigIntegerField's value goes to psycopg as Int8 (the PostgreSQL backend's
            # own wrapper, so the parameter is sent as a bigint): the call's value too.
            kind = type(params[found[0]])
            wraps.append(kind if kind is not type(sentinel) else None)
        fields = [s[0] for s in compiler.select[0 : compiler.col_count]]
        converters = tuple((pos, tuple(convs), expr) for pos, (convs, expr) in compiler.get_converters(fields).items())
        if not queryset.query.default_cols:  # values() / values_list(): rows are tuples
            return _Compiled(sql, params, tuple(positions), tuple(wraps), converters, model_rows=False)
        klass_info = compiler.klass_info
        select_fields = klass_info["select_fields"]
        start, end = select_fields[0], select_fields[-1] + 1
        return _Compiled(
            sql,
            params,
            tuple(positions),
            tuple(wraps),
            converters,
            model_rows=True,
            model=klass_info["model"],
            init_list=tuple(f[0].target.attname for f in compiler.select[start:end]),
            start=start,
            end=end,
            populators=tuple(_Joined(info, compiler.select, queryset.db) for info in klass_info.get("related_klass_infos", [])),
            annotations=tuple((compiler.annotation_col_map or {}).items()),
        )

    def _execute(self, values: tuple, *, many: bool, prefix: tuple[str, list] | None = None) -> tuple[_Compiled, list]:
        compiled = self._parts()
        params = list(compiled.params)
        for value, positions, wrap in zip(values, compiled.positions, compiled.wraps, strict=True):
            if wrap is not None:
                value = wrap(value)
            for i in positions:
                params[i] = value
        sql = compiled.sql
        if prefix is not None:  # a WITH clause the query reads (``one(prefix=...)``)
            sql = f"{prefix[0]} {sql}"
            params = [*prefix[1], *params]
        with connection.cursor() as cursor:
            cursor.execute(sql, params)
            rows = cursor.fetchall() if many else [row for row in [cursor.fetchone()] if row is not None]
        return compiled, rows

    def _convert(self, compiled: _Compiled, row) -> Any:
        row = list(row)
        for pos, convs, expression in compiled.converters:
            value = row[pos]
            for converter in convs:
                value = converter(value, expression, connection)
            row[pos] = value
        if not compiled.model_rows:
            return tuple(row)
        obj = compiled.model.from_db(connection.alias, compiled.init_list, row[compiled.start : compiled.end])
        for populator in compiled.populators:
            populator.populate(row, obj)
        for name, pos in compiled.annotations:
            setattr(obj, name, row[pos])
        return obj

    def one(self, *values, prefix: tuple[str, list] | None = None) -> Any:
        """The first row for ``values`` (the queryset's own order), or None. ``prefix``:
        ``(sql, params)`` sent before the query in the same statement (``WITH name AS
        (…)``, which the queryset reads through ``RawSQL``)."""
        compiled, rows = self._execute(values, many=False, prefix=prefix)
        return self._convert(compiled, rows[0]) if rows else None

    def all(self, *values) -> list:
        """Every row for ``values``, in the queryset's order."""
        compiled, rows = self._execute(values, many=True)
        return [self._convert(compiled, row) for row in rows]


@cache
def _update_sql(
    model: type[models.Model], vendor: str, names: tuple[str, ...], where: tuple[str, ...]
) -> tuple[str, tuple, tuple]:
    quote = connection.ops.quote_name
    sets = tuple(concrete_field(model, name) for name in names)
    conditions = tuple(concrete_field(model, name) for name in where)
    sql = (
        f"UPDATE {quote(model._meta.db_table)} SET {', '.join(f'{quote(f.column)} = %s' for f in sets)} "
        f"WHERE {' AND '.join(f'{quote(f.column)} = %s' for f in conditions)}"
    )
    return sql, sets, conditions


def update_statement(model: type[models.Model], where: dict[str, Any], **values: Any) -> tuple[str, list]:
    """``(sql, params)`` of the UPDATE ``update_rows(model, where, **values)`` sends, for
    a caller that sends it inside a statement of its own (a CTE)."""
    sql, sets, conditions = _update_sql(model, connection.vendor, tuple(values), tuple(where))
    params = [f.get_db_prep_save(v, connection) for f, v in zip(sets, values.values(), strict=True)]
    params += [f.get_db_prep_value(v, connection) for f, v in zip(conditions, where.values(), strict=True)]
    return sql, params


def update_rows(model: type[models.Model], where: dict[str, Any], **values: Any) -> int:
    """``model.objects.filter(**where).update(**values)`` for plain equalities (field
    names, no lookups, no expressions), with the SQL built once per model, fields and
    database (a conditional UPDATE a turn sends a few times: a delivery's settle, a
    request's end). Values are prepared as the ORM's ``update`` prepares them
    (``get_db_prep_save``). Returns the rows updated.
    """
    sql, params = update_statement(model, where, **values)
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.rowcount
