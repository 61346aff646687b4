"""Row reads and writes for the hot paths, with the SQL built once per model and database
instead of compiled by the ORM on every call (docs/architecture.md "A post end to end",
"Storage under the ORM").

Compiling a query is most of what an ORM call costs on this stack (on SQLite a
``Model.objects.get`` cost about ten times its ``execute``), and a post makes a few of
them. These helpers send the same statements the ORM would, with each field's own
conversions (``Field.pre_save``, ``Field.get_db_prep_save`` on the way in, skipped per
field where they change nothing, decided once per model: ``WritePlan``; the backend's
and the field's ``from_db_value`` converters on the way out), so an instance read or
written here is the instance the ORM would give. They run on the two databases
the server supports, PostgreSQL and SQLite (3.35 or newer: ``RETURNING``; a system check
refuses any other).

This module is also the one place a hand-written statement gets a model's column list
(``insert_parts``) and turns a row of a model's columns into an instance (``instance``):
``mailboxes.lines``, ``workforce.sessions`` and ``boards.services.claims`` build their
statements from these, never from names copied by hand. The instances they make are
marked saved through the documented ``Model._state.adding``/``_state.db`` and
``Model.from_db``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from functools import cache
from operator import itemgetter
from typing import Any, TypeVar

from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, connection, connections, models
from django.db.backends.base.base import BaseDatabaseWrapper
from django.utils import timezone

M = TypeVar("M", bound=models.Model)

VENDORS = ("postgresql", "sqlite")


def _row_lock(vendor: str) -> str:
    # FOR NO KEY UPDATE on PostgreSQL: it serializes the lockers as FOR UPDATE does, but
    # lets a foreign key's check (FOR KEY SHARE) through, so a transaction that holds a
    # row referencing the locked one (a seat's turn slot, its session) can commit while
    # another holds the lock and waits on that row: no deadlock between them.
    return " FOR NO KEY UPDATE" if vendor == "postgresql" else " FOR UPDATE"


def quote(name: str) -> str:
    """``name`` (a table or column) quoted for the default database."""
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
def _select_parts(model: type[models.Model], vendor: str) -> tuple[str, tuple[str, ...], tuple[Any, ...]]:
    fields = model._meta.concrete_fields
    columns = ", ".join(quote(f.column) for f in fields)
    converters = []
    for i, field in enumerate(fields):
        col = field.get_col(model._meta.db_table)
        found = connection.ops.get_db_converters(col) + col.get_db_converters(connection)
        if found:  # a column with none is taken as the cursor returned it
            converters.append((i, col, tuple(found)))
    return f"SELECT {columns} FROM {quote(model._meta.db_table)}", tuple(f.attname for f in fields), tuple(converters)


def select_columns(model: type[models.Model], alias: str = "") -> str:
    """``model``'s concrete columns, in field order, quoted and comma-separated (each
    prefixed with ``alias.`` when given): the column list ``instance`` reads."""
    prefix = f"{alias}." if alias else ""
    return ", ".join(f"{prefix}{quote(f.column)}" for f in model._meta.concrete_fields)


def instance(model: type[M], values: Sequence[Any], conn: BaseDatabaseWrapper | None = None) -> M:
    """An instance of ``model`` from ``values``, a row of its concrete columns in field
    order (``select_columns``) as a cursor returned it, through the converters a
    queryset applies (JSON from text, datetimes on SQLite, ...)."""
    conn = conn or connections[DEFAULT_DB_ALIAS]
    _, names, converters = _select_parts(model, conn.vendor)
    if len(values) != len(names):
        raise ValueError(f"{model._meta.label} has {len(names)} columns; the row has {len(values)}")
    converted = list(values)
    for i, col, found in converters:
        value = converted[i]
        for converter in found:
            value = converter(value, col, conn)
        converted[i] = value
    return model.from_db(conn.alias, names, converted)


def select_one(model: type[M], where: str, params: Sequence[Any], *, for_update: bool = False) -> M | None:
    """The one ``model`` row ``WHERE <where>`` selects (``%s`` placeholders, quoted
    column names), as an instance; None when there is none. ``for_update`` takes its
    row lock (``FOR NO KEY UPDATE`` on PostgreSQL; nothing on SQLite, whose write transaction is already
    serialized)."""
    conn = connections[DEFAULT_DB_ALIAS]  # once: each use of the ``connection`` proxy is a context-local lookup
    select, _, _ = _select_parts(model, conn.vendor)
    sql = f"{select} WHERE {where}"
    if for_update and conn.features.has_select_for_update:
        sql += _row_lock(conn.vendor)
    with conn.cursor() as cursor:
        cursor.execute(sql, params)
        row = cursor.fetchone()
    return None if row is None else instance(model, row, conn)


@cache
def insert_parts(
    model: type[models.Model], vendor: str, computed: tuple[tuple[str, str], ...] = ()
) -> tuple[str, str, WritePlan]:
    """``(columns, values, plan)`` of an INSERT of one ``model`` row: every concrete
    field but the primary key, in field order. ``columns`` is the quoted column list,
    ``values`` the matching ``%s`` placeholders, except that a field named in
    ``computed`` (``((attname, sql expression), ...)``: a number a CTE hands out, a
    selected row's key) takes its expression; ``plan`` turns an instance
    (``insert_params``) or a mapping of values (``row_params``) into the parameters
    that fill the placeholders. Built once per model, database and shape."""
    pk = model._meta.pk
    given = dict(computed)
    fields = tuple(f for f in model._meta.concrete_fields if f is not pk)
    columns = ", ".join(quote(f.column) for f in fields)
    values = ", ".join(given.get(f.attname, "%s") for f in fields)
    return columns, values, WritePlan(model, tuple(f for f in fields if f.attname not in given), add=True)


# Field classes whose value goes to the database as it is when it already has the type
# the column takes (their ``pre_save`` reads the attribute; their ``get_db_prep_save`` turns
# that value into itself): the post's hot path skips their conversion chain, a third of its
# CPU here (bench/posts.py). Exact classes only: a subclass may convert.
_SENT_AS_IS: dict[type[models.Field], tuple[type, ...]] = {
    models.CharField: (str,),
    models.TextField: (str,),
    models.BooleanField: (bool,),
    models.IntegerField: (int,),
    models.BigIntegerField: (int,),
    models.SmallIntegerField: (int,),
    models.PositiveIntegerField: (int,),
    models.PositiveSmallIntegerField: (int,),
    # A key's own column (``ops.validate_autopk_value`` changes nothing on PostgreSQL or
    # SQLite), and a foreign key's value, which goes as its target's does.
    models.AutoField: (int,),
    models.BigAutoField: (int,),
    models.SmallAutoField: (int,),
}

# How a plan turns a field's value into its parameter (``WritePlan``).
_AS_IS = 0  # a type of _SENT_AS_IS's (or None): the value; any other: _CHAIN
_NOW = 1  # DateTimeField(auto_now, or auto_now_add on an INSERT): ``timezone.now()``, set on the instance
_DATETIME = 2  # DateTimeField: an aware (or, USE_TZ off, naive) datetime goes to ``ops.adapt_datetimefield_value``
_JSON = 3  # JSONField: a plain JSON value goes to ``ops.adapt_json_value`` with the field's encoder
_CHAIN = 4  # any other field: ``get_db_prep_save(pre_save(obj, add))``, the ORM's own chain

# The values a JSONField's ``get_db_prep_save`` hands to ``adapt_json_value`` unchanged
# (``get_prep_value`` changes only a lazy string; None is SQL NULL, sent as it is).
_JSON_PLAIN = (dict, list, str, int, float, bool)


def _step(field: models.Field, add: bool) -> tuple[int, tuple[type, ...]]:
    kind = type(field)
    if kind is models.ForeignKey:  # ForeignKey.get_db_prep_save is its target field's
        target = type(field.target_field)  # type: ignore[attr-defined]
        return (_AS_IS, _SENT_AS_IS[target]) if target in _SENT_AS_IS else (_CHAIN, ())
    if kind in _SENT_AS_IS:
        return _AS_IS, _SENT_AS_IS[kind]
    if kind is models.DateTimeField:
        # DateTimeField.pre_save: now() for auto_now, and for auto_now_add on an insert;
        # else the attribute. Its get_db_prep_save sends a datetime through
        # get_prep_value (which changes only a naive one while USE_TZ is on) to the backend.
        now = field.auto_now or (field.auto_now_add and add)  # type: ignore[attr-defined]
        return (_NOW, ()) if now else (_DATETIME, (datetime,))
    if kind is models.JSONField:
        return _JSON, _JSON_PLAIN
    return _CHAIN, ()


class WritePlan:
    """How the values of ``model``'s ``fields`` become the parameters of a statement
    that writes them (an INSERT with ``add``, an UPDATE without), decided once per field:
    the value ``save()`` would send, through each field's ``pre_save`` and
    ``get_db_prep_save``, with the chain skipped where it is known to change nothing
    (a plain value of a plain field; a datetime or a JSON value goes straight to the
    backend's adapter, as the chain would send it).

    Built by ``insert_parts`` (and ``update_statement``); ``params(obj)`` reads an
    instance, ``values(mapping)`` a mapping of attnames (no instance: a row written and
    never read back).
    """

    def __init__(self, model: type[models.Model], fields: Sequence[models.Field], *, add: bool):
        self.model = model
        self.fields = tuple(fields)
        self.add = add
        self.attnames = tuple(f.attname for f in self.fields)
        self._steps = tuple((i, f, f.attname, *_step(f, add)) for i, f in enumerate(self.fields))
        # Every attname at once from an instance's __dict__, where Model.__init__ and
        # from_db put each field's value (a deferred field is not there: getattr then).
        if len(self.attnames) == 1:
            only = self.attnames[0]
            self._fetch: Any = lambda d: (d[only],)
        else:
            self._fetch = itemgetter(*self.attnames)
        # A field whose pre_save does more than read the attribute needs an instance.
        self._needs_instance = tuple(
            f.name for i, f, _, kind, _ in self._steps if kind == _CHAIN and type(f).pre_save is not models.Field.pre_save
        )

    def params(self, obj: models.Model, conn: BaseDatabaseWrapper) -> list[Any]:
        """The parameters of ``obj``'s values, as ``save()`` sends them (``pre_save``:
        ``auto_now_add`` sets the attribute; ``get_db_prep_save``: JSON, dates)."""
        try:
            params = list(self._fetch(obj.__dict__))
        except KeyError:  # a deferred field: its descriptor loads it
            params = [getattr(obj, name) for name in self.attnames]
        ops = conn.ops
        for i, field, attname, kind, plain in self._steps:
            value = params[i]
            if kind == _AS_IS:
                if value is None or type(value) in plain:
                    continue
            elif kind == _NOW:
                value = timezone.now()
                setattr(obj, attname, value)
                params[i] = ops.adapt_datetimefield_value(value)
                continue
            elif kind == _DATETIME:
                if value is None:
                    continue
                if type(value) in plain and (value.utcoffset() is not None or not settings.USE_TZ):
                    params[i] = ops.adapt_datetimefield_value(value)
                    continue
            elif kind == _JSON:
                if value is None:
                    continue
                if type(value) in plain:
                    params[i] = ops.adapt_json_value(value, field.encoder)  # type: ignore[attr-defined]
                    continue
            params[i] = field.get_db_prep_save(field.pre_save(obj, self.add), conn)
        return params

    def values(self, given: Mapping[str, Any], conn: BaseDatabaseWrapper) -> list[Any]:
        """The parameters of a row with the values ``given`` (by attname) and, for a field
        not given, its default (``Field.get_default``; ``auto_now``/``auto_now_add``:
        ``timezone.now()``), as ``save()`` of an instance made with them would send.

        Raises:
            TypeError: a field's ``pre_save`` needs an instance (``params``).
        """
        if self._needs_instance:
            raise TypeError(f"{self.model._meta.label}: {', '.join(self._needs_instance)} need an instance")
        params: list[Any] = [None] * len(self._steps)
        ops = conn.ops
        for i, field, attname, kind, plain in self._steps:
            if kind == _NOW:
                params[i] = ops.adapt_datetimefield_value(timezone.now())
                continue
            value = given[attname] if attname in given else field.get_default()
            if value is None:
                continue
            if type(value) in plain:
                if kind == _AS_IS:
                    params[i] = value
                    continue
                if kind == _JSON:
                    params[i] = ops.adapt_json_value(value, field.encoder)  # type: ignore[attr-defined]
                    continue
                if value.utcoffset() is not None or not settings.USE_TZ:
                    params[i] = ops.adapt_datetimefield_value(value)
                    continue
            params[i] = field.get_db_prep_save(value, conn)
        return params


def insert_params(obj: models.Model, plan: WritePlan, conn: BaseDatabaseWrapper | None = None) -> list[Any]:
    """The values of the unsaved ``obj`` as ``save(force_insert=True)`` sends them, for
    ``plan`` (``insert_parts``' third part; ``WritePlan.params``)."""
    return plan.params(obj, conn or connections[DEFAULT_DB_ALIAS])


def row_params(plan: WritePlan, values: Mapping[str, Any], conn: BaseDatabaseWrapper | None = None) -> list[Any]:
    """The parameters of a row of ``values`` (by attname; defaults for the others) for
    ``plan``, without an instance (``WritePlan.values``).

    Raises:
        TypeError: the model has a field whose ``pre_save`` needs an instance.
    """
    return plan.values(values, conn or connections[DEFAULT_DB_ALIAS])


def mark_saved(obj: models.Model, pk: Any, conn: BaseDatabaseWrapper | None = None) -> None:
    """Set the primary key of ``obj``, just written by a statement of ours, and mark it
    saved on the default database, as ``save`` would."""
    meta = obj._meta
    if meta.parents:  # multi-table inheritance: the parents' links take the key too
        obj.pk = pk
    else:
        setattr(obj, meta.pk.attname, pk)
    state = obj._state
    state.adding = False
    state.db = (conn or connections[DEFAULT_DB_ALIAS]).alias


def insert_sql(model: type[models.Model], vendor: str) -> str:
    """The INSERT of one ``model`` row (``insert_parts``' columns, ``RETURNING`` its
    primary key), for a caller that runs it on a cursor it already holds."""
    return _insert_sql(model, vendor, 1)


@cache
def _insert_sql(model: type[models.Model], vendor: str, count: int) -> str:
    columns, values, _ = insert_parts(model, vendor)
    rows = ", ".join([f"({values})"] * count)
    return f"INSERT INTO {quote(model._meta.db_table)} ({columns}) VALUES {rows} RETURNING {quote(model._meta.pk.column)}"


def insert(obj: models.Model) -> None:
    """INSERT ``obj`` (an unsaved instance with an auto primary key) as ``save(
    force_insert=True)`` would, without signals; sets its primary key.

    Raises:
        IntegrityError: a constraint refused the row.
    """
    conn = connections[DEFAULT_DB_ALIAS]
    model = type(obj)
    plan = insert_parts(model, conn.vendor)[2]
    with conn.cursor() as cursor:
        cursor.execute(_insert_sql(model, conn.vendor, 1), plan.params(obj, conn))
        (pk,) = cursor.fetchone()
    mark_saved(obj, pk, conn)


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
    plan = insert_parts(model, conn.vendor)[2]
    size = max(1, conn.ops.bulk_batch_size(list(plan.fields), objs))
    with conn.cursor() as cursor:
        for start in range(0, len(objs), size):
            batch = objs[start : start + size]
            params = [value for obj in batch for value in plan.params(obj, conn)]
            cursor.execute(_insert_sql(model, conn.vendor, len(batch)), params)
            # PostgreSQL and SQLite return the rows of one multi-row VALUES in its order,
            # which bulk_create relies on too.
            for obj, (pk,) in zip(batch, cursor.fetchall(), strict=True):
                mark_saved(obj, pk, conn)


def concrete_field(model: type[models.Model], name: str) -> models.Field[Any, Any]:
    """``model``'s concrete field ``name`` (a column of its table).

    Raises:
        FieldDoesNotExist: it has none by that name; TypeError: ``name`` is a relation's
            reverse side or another non-column field."""
    field = model._meta.get_field(name)
    if not isinstance(field, models.Field) or not field.concrete:
        raise TypeError(f"{model._meta.label}.{name} is not a column")
    return field


@cache
def _update_parts(model: type[models.Model], vendor: str, names: tuple[str, ...]) -> tuple[str, WritePlan]:
    fields = tuple(concrete_field(model, name) for name in names)
    sets = ", ".join(f"{quote(f.column)} = %s" for f in fields)
    pk = model._meta.pk
    return f"UPDATE {quote(model._meta.db_table)} SET {sets} WHERE {quote(pk.column)} = %s", WritePlan(model, fields, add=False)


def update_statement(obj: models.Model, names: Sequence[str], conn: BaseDatabaseWrapper | None = None) -> tuple[str, list[Any]]:
    """``(sql, params)`` of the UPDATE ``update(obj, names)`` sends (``%s``
    placeholders), for a caller that sends it inside a statement of its own (a CTE)."""
    conn = conn or connections[DEFAULT_DB_ALIAS]
    sql, plan = _update_parts(type(obj), conn.vendor, tuple(names))
    params = plan.params(obj, conn)
    params.append(obj.pk)
    return sql, params


def update(obj: models.Model, names: Sequence[str]) -> int:
    """UPDATE the fields ``names`` of the saved ``obj`` as ``save(update_fields=names)``
    would, without signals. Returns the rows updated (1, or 0 when it is gone)."""
    conn = connections[DEFAULT_DB_ALIAS]
    sql, params = update_statement(obj, names, conn)
    with conn.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.rowcount


@cache
def _select_and_insert_sql(
    model: type[models.Model], where: str, into: type[models.Model], link: str, for_update: bool, on_conflict: str, vendor: str
) -> str:
    """The statement of ``select_one_and_insert``, built once: quoting its names per
    call was a tenth of a post's CPU."""
    select, _, _ = _select_parts(model, vendor)
    lock = _row_lock(vendor) if for_update else ""
    columns, values, _ = insert_parts(into, vendor, ((link, f"found.{quote(model._meta.pk.column)}"),))
    returning = quote(into._meta.pk.column)
    conflict = f" ON CONFLICT {on_conflict} DO NOTHING" if on_conflict else ""
    joined = "found LEFT JOIN inserted ON TRUE" if on_conflict else "found, inserted"
    return (
        f"WITH found AS ({select} WHERE {where}{lock}), "
        f"inserted AS (INSERT INTO {quote(into._meta.db_table)} ({columns}) "
        f"SELECT {values} FROM found{conflict} RETURNING {returning}) "
        f"SELECT found.*, inserted.{returning} FROM {joined}"
    )


def select_one_and_insert(
    model: type[M],
    where: str,
    params: Sequence[Any],
    obj: models.Model,
    link: str,
    *,
    for_update: bool = False,
    on_conflict: str = "",
) -> M | None:
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
    sql = _select_and_insert_sql(model, where, type(obj), link, for_update, on_conflict, conn.vendor)
    plan = insert_parts(type(obj), conn.vendor, ((link, ""),))[2]
    with conn.cursor() as cursor:
        cursor.execute(sql, [*params, *plan.params(obj, conn)])
        row = cursor.fetchone()
    if row is None:
        return None
    found = instance(model, row[:-1], conn)
    setattr(obj, link, found.pk)
    if row[-1] is not None:  # None: on_conflict, not inserted
        mark_saved(obj, row[-1], conn)
    return found
