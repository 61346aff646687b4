"""Row reads and writes for the hot paths, with the SQL built once per model and database
instead of compiled by the ORM on every call (docs/architecture.md "A post end to end").

Compiling a query is most of what an ORM call costs on this stack (on SQLite a
``Model.objects.get`` cost about ten times its ``execute``), and a post makes a few of
them. These helpers send the same statements the ORM would, with each field's own
conversions (``Field.pre_save``, ``Field.get_db_prep_save`` on the way in; the
backend's and the field's ``from_db_value`` converters on the way out), so an instance
read or written here is the instance the ORM would give. They run on PostgreSQL and on
SQLite (3.35 or newer: ``RETURNING``); ``supported()`` says whether the default
connection is one of those, and callers use the ORM otherwise.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache
from typing import Any

from django.db import DEFAULT_DB_ALIAS, connection, connections, models

VENDORS = ("postgresql", "sqlite")


def supported() -> bool:
    """True when the default database is PostgreSQL or SQLite (these helpers' SQL)."""
    return connection.vendor in VENDORS


def _row_lock(vendor: str) -> str:
    # FOR NO KEY UPDATE on PostgreSQL: it serializes the lockers as FOR UPDATE does, but
    # lets a foreign key's check (FOR KEY SHARE) through, so a transaction that holds a
    # row referencing the locked one (a seat's turn slot, its session) can commit while
    # another holds the lock and waits on that row: no deadlock between them.
    return " FOR NO KEY UPDATE" if vendor == "postgresql" else " FOR UPDATE"


def _quote(name: str) -> str:
    return connection.ops.quote_name(name)


def column_field(model: type[models.Model], name: str) -> models.Field:
    """``model``'s field ``name``, which has a column of its own.

    Raises:
        FieldDoesNotExist: ``model`` has no field ``name``.
        ValueError: it has no column (a relation's reverse side, a generic key).
    """
    field = model._meta.get_field(name)
    if not isinstance(field, models.Field) or not field.concrete:
        raise ValueError(f"{model.__name__}.{name} has no column")
    return field


@cache
def _select_parts(model: type[models.Model], vendor: str) -> tuple[str, tuple[str, ...], tuple]:
    fields = model._meta.concrete_fields
    columns = ", ".join(_quote(f.column) for f in fields)
    converters = []
    for field in fields:
        col = field.get_col(model._meta.db_table)
        found = connection.ops.get_db_converters(col) + col.get_db_converters(connection)
        converters.append((col, tuple(found)))
    return f"SELECT {columns} FROM {_quote(model._meta.db_table)}", tuple(f.attname for f in fields), tuple(converters)


def select_one(model: type[models.Model], where: str, params: Sequence[Any], *, for_update: bool = False):
    """The one ``model`` row ``WHERE <where>`` selects (``%s`` placeholders, quoted
    column names), as an instance; None when there is none. ``for_update`` takes its
    row lock (``FOR NO KEY UPDATE`` on PostgreSQL; nothing on SQLite, whose write transaction is already
    serialized)."""
    conn = connections[DEFAULT_DB_ALIAS]  # once: each use of the ``connection`` proxy is a context-local lookup
    select, names, converters = _select_parts(model, conn.vendor)
    sql = f"{select} WHERE {where}"
    if for_update and conn.features.has_select_for_update:
        sql += _row_lock(conn.vendor)
    with conn.cursor() as cursor:
        cursor.execute(sql, params)
        row = cursor.fetchone()
    if row is None:
        return None
    values = []
    for value, (col, found) in zip(row, converters, strict=True):
        for converter in found:
            value = converter(value, col, conn)
        values.append(value)
    return model.from_db(conn.alias, names, values)


@cache
def _insert_parts(model: type[models.Model], vendor: str) -> tuple[str, tuple]:
    pk = model._meta.pk
    fields = tuple(f for f in model._meta.concrete_fields if f is not pk)
    columns = ", ".join(_quote(f.column) for f in fields)
    marks = ", ".join(["%s"] * len(fields))
    sql = f"INSERT INTO {_quote(model._meta.db_table)} ({columns}) VALUES ({marks}) RETURNING {_quote(pk.column)}"
    return sql, fields


def insert(obj: models.Model) -> None:
    """INSERT ``obj`` (an unsaved instance with an auto primary key) as ``save(
    force_insert=True)`` would, without signals; sets its primary key.

    Raises:
        IntegrityError: a constraint refused the row.
    """
    conn = connections[DEFAULT_DB_ALIAS]
    sql, fields = _insert_parts(type(obj), conn.vendor)
    params = [f.get_db_prep_save(f.pre_save(obj, True), conn) for f in fields]
    with conn.cursor() as cursor:
        cursor.execute(sql, params)
        (obj.pk,) = cursor.fetchone()
    obj._state.adding = False
    obj._state.db = conn.alias


@cache
def _insert_many_sql(model: type[models.Model], vendor: str, count: int) -> str:
    pk = model._meta.pk
    fields = _insert_parts(model, vendor)[1]
    columns = ", ".join(_quote(f.column) for f in fields)
    row = "(" + ", ".join(["%s"] * len(fields)) + ")"
    values = ", ".join([row] * count)
    return f"INSERT INTO {_quote(model._meta.db_table)} ({columns}) VALUES {values} RETURNING {_quote(pk.column)}"


def insert_many(objs: Sequence[models.Model]) -> None:
    """INSERT the unsaved instances ``objs`` (one model, auto primary keys) as
    ``bulk_create`` would: one statement per batch the backend allows
    (``ops.bulk_batch_size``), no signals; sets each one's primary key, in order.
    Nothing is sent for an empty ``objs``.

    Raises:
        IntegrityError: a constraint refused a row: that batch's statement writes none,
            and the caller's transaction (every caller holds one) rolls back the others.
    """
    if not objs:
        return
    conn = connections[DEFAULT_DB_ALIAS]
    model = type(objs[0])
    fields = _insert_parts(model, conn.vendor)[1]
    size = max(1, conn.ops.bulk_batch_size(fields, objs))
    with conn.cursor() as cursor:
        for start in range(0, len(objs), size):
            batch = objs[start : start + size]
            params = [f.get_db_prep_save(f.pre_save(obj, True), conn) for obj in batch for f in fields]
            cursor.execute(_insert_many_sql(model, conn.vendor, len(batch)), params)
            # PostgreSQL and SQLite return the rows of one multi-row VALUES in its order,
            # which bulk_create relies on too.
            for obj, (pk,) in zip(batch, cursor.fetchall(), strict=True):
                obj.pk = pk
                obj._state.adding = False
                obj._state.db = conn.alias


@cache
def _update_parts(model: type[models.Model], vendor: str, names: tuple[str, ...]) -> tuple[str, tuple]:
    fields = tuple(column_field(model, name) for name in names)
    sets = ", ".join(f"{_quote(f.column)} = %s" for f in fields)
    pk = model._meta.pk
    return f"UPDATE {_quote(model._meta.db_table)} SET {sets} WHERE {_quote(pk.column)} = %s", fields


def update_statement(obj: models.Model, names: Sequence[str]) -> tuple[str, list]:
    """``(sql, params)`` of the UPDATE ``update(obj, names)`` sends (``%s``
    placeholders), for a caller that sends it inside a statement of its own (a CTE)."""
    conn = connections[DEFAULT_DB_ALIAS]
    sql, fields = _update_parts(type(obj), conn.vendor, tuple(names))
    params = [f.get_db_prep_save(f.pre_save(obj, False), conn) for f in fields]
    params.append(obj.pk)
    return sql, params


def update(obj: models.Model, names: Sequence[str]) -> int:
    """UPDATE the fields ``names`` of the saved ``obj`` as ``save(update_fields=names)``
    would, without signals. Returns the rows updated (1, or 0 when it is gone)."""
    sql, params = update_statement(obj, names)
    with connections[DEFAULT_DB_ALIAS].cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.rowcount


@cache
def _select_and_insert_parts(
    model: type[models.Model], where: str, into: type[models.Model], link: str, for_update: bool, on_conflict: str, vendor: str
) -> tuple[str, tuple]:
    """The statement of ``select_one_and_insert`` and the fields whose values it takes
    (every field of ``into`` but its primary key and ``link``), built once: quoting its
    names per call was a tenth of a post's CPU."""
    select, _, _ = _select_parts(model, vendor)
    _, fields = _insert_parts(into, vendor)
    lock = _row_lock(vendor) if for_update else ""
    pk = _quote(model._meta.pk.column)
    columns = [_quote(f.column) for f in fields]
    values = [f"found.{pk}" if field.attname == link else "%s" for field in fields]
    returning = _quote(into._meta.pk.column)
    conflict = f" ON CONFLICT {on_conflict} DO NOTHING" if on_conflict else ""
    joined = "found LEFT JOIN inserted ON TRUE" if on_conflict else "found, inserted"
    sql = (
        f"WITH found AS ({select} WHERE {where}{lock}), "
        f"inserted AS (INSERT INTO {_quote(into._meta.db_table)} ({', '.join(columns)}) "
        f"SELECT {', '.join(values)} FROM found{conflict} RETURNING {returning}) "
        f"SELECT found.*, inserted.{returning} FROM {joined}"
    )
    return sql, tuple(field for field in fields if field.attname != link)


def select_one_and_insert(
    model: type[models.Model],
    where: str,
    params: Sequence[Any],
    obj: models.Model,
    link: str,
    *,
    for_update: bool = False,
    on_conflict: str = "",
):
    """PostgreSQL only: ``select_one(model, where, params)`` and, in the same statement,
    INSERT ``obj`` (as ``insert``) with its foreign key ``link`` (an attname such as
    ``session_id``) set to the selected row's primary key: one round trip instead of
    two. Returns the selected instance (``obj`` inserted, its primary key set), or None
    when no row matched (nothing inserted).

    ``on_conflict``: a conflict target (``("a", "b") WHERE …``, a unique index's columns
    and predicate); a row that would break it is not inserted (``ON CONFLICT … DO
    NOTHING``, which waits for a concurrent inserter of the same key to end first), and
    the selected instance is returned with ``obj.pk`` left None.

    Raises:
        IntegrityError: a constraint refused ``obj``'s row.
    """
    conn = connections[DEFAULT_DB_ALIAS]  # once: each use of the ``connection`` proxy is a context-local lookup
    _, names, converters = _select_parts(model, conn.vendor)
    sql, fields = _select_and_insert_parts(model, where, type(obj), link, for_update, on_conflict, conn.vendor)
    insert_params = [field.get_db_prep_save(field.pre_save(obj, True), conn) for field in fields]
    with conn.cursor() as cursor:
        cursor.execute(sql, [*params, *insert_params])
        row = cursor.fetchone()
    if row is None:
        return None
    values_out = []
    for value, (col, found) in zip(row[:-1], converters, strict=True):
        for converter in found:
            value = converter(value, col, conn)
        values_out.append(value)
    instance = model.from_db(conn.alias, names, values_out)
    setattr(obj, link, instance.pk)
    if row[-1] is None:  # on_conflict: not inserted
        return instance
    obj.pk = row[-1]
    obj._state.adding = False
    obj._state.db = conn.alias
    return instance
