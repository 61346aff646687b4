"""Wire shapes of the kernel's HTTP answers (also what the OpenAPI schema documents)."""

from __future__ import annotations

from rest_framework import serializers

from workforce.models import Item, Request


class ActionCallSerializer(serializers.Serializer):
    """Body of ``POST /api/flows/{kind}/{session_id}/actions/{action}``."""

    userId = serializers.CharField(required=False, help_text="The caller, when no authentication is configured.")
    input = serializers.JSONField(required=False, help_text="The action's input object.")


class CancelCallSerializer(serializers.Serializer):
    """Body of ``POST /api/requests/{request_id}/cancel``."""

    userId = serializers.CharField(required=False, help_text="The caller, when no authentication is configured.")


class ErrorSerializer(serializers.Serializer):
    reason = serializers.CharField()
    message = serializers.CharField()


class RefusalSerializer(serializers.Serializer):
    """A refusal's answer: ``{requestId, status: "failed", error: {reason, message}}``."""

    requestId = serializers.CharField(allow_null=True)
    status = serializers.CharField()
    error = ErrorSerializer()


class RequestSerializer(serializers.Serializer):
    """One request: ``{requestId, sessionId, flowKind, action, status, output?, error?}``."""

    requestId = serializers.CharField(source="request_id")
    sessionId = serializers.CharField(source="session.session_id")
    flowKind = serializers.CharField(source="session.flow_kind")
    action = serializers.CharField()
    status = serializers.ChoiceField(choices=Request.Status.choices)
    output = serializers.JSONField(required=False)
    error = ErrorSerializer(required=False)
    createdAt = serializers.DateTimeField(source="created_at")
    finishedAt = serializers.DateTimeField(source="finished_at", allow_null=True)

    def to_representation(self, instance: Request) -> dict:
        data = super().to_representation(instance)
        include_output = self.context.get("include_output", True)
        if instance.output is None or not include_output:
            data.pop("output", None)
        if instance.error is None:
            data.pop("error", None)
        return data


_STATUS = serializers.ChoiceField(choices=Request.Status.choices)
_AT = serializers.DateTimeField()


def request_wire(instance: Request, *, include_output: bool = True) -> dict:
    """``RequestSerializer(instance).data``, key for key, without building a serializer
    (DRF deep-copies a serializer's fields for each instance, which cost more than the
    rest of the answer): the 202 of every action call is this."""
    session = instance.session
    data: dict = {
        "requestId": str(instance.request_id),
        "sessionId": str(session.session_id),
        "flowKind": str(session.flow_kind),
        "action": str(instance.action),
        "status": _STATUS.to_representation(instance.status),
    }
    if instance.output is not None and include_output:
        data["output"] = instance.output
    if instance.error is not None:
        data["error"] = {"reason": str(instance.error["reason"]), "message": str(instance.error["message"])}
    data["createdAt"] = _AT.to_representation(instance.created_at)
    data["finishedAt"] = None if instance.finished_at is None else _AT.to_representation(instance.finished_at)
    return data


class RequestLinksSerializer(serializers.Serializer):
    request = serializers.URLField(help_text="GET: this request")
    wait = serializers.URLField(help_text="GET: this request, once it finished (waits up to 30 s)")
    runs = serializers.URLField(help_text="GET: the runs it started that have not finished")
    stream = serializers.URLField(help_text="GET: the session's items as server-sent events")


class RequestAnswerSerializer(RequestSerializer):
    """The schema of a request as an answer: a request that did not fail also carries
    ``links`` (the views add them: ``workforce.api.views.request_links``)."""

    links = RequestLinksSerializer(required=False, read_only=True)


class ItemSerializer(serializers.Serializer):
    seq = serializers.IntegerField()
    type = serializers.CharField()
    component = serializers.CharField()
    requestId = serializers.CharField(source="request.request_id", allow_null=True, default=None)
    createdAt = serializers.DateTimeField(source="created_at")

    def get_fields(self) -> dict[str, serializers.Field]:
        # ``data`` names Serializer's own property (the serialized dict), so it is no class
        # attribute here: it goes in after ``component``, where the wire has it.
        fields = super().get_fields()
        tail = {name: fields.pop(name) for name in ("requestId", "createdAt")}
        return {**fields, "data": serializers.JSONField(), **tail}


# ItemSerializer's own createdAt field (DRF's DateTimeField: the current time zone, ISO
# 8601, "Z" for UTC), so that a plain row's time is written as the serializer writes it.
_CREATED_AT = serializers.DateTimeField()


def item_wire(row: tuple) -> dict:
    """``ItemSerializer``'s dict for an item read as a row (``workforce.queries.
    list_item_rows``: ``(seq, type, component, data, request id or None, created_at)``),
    with no model instance and no serializer machinery: a live stream's hot path. The
    same keys, in the same order, with the same values (``tests/seats/
    test_stream_reads.py`` compares the two for every item type)."""
    seq, type_, component, data, request_id, created_at = row
    return {
        "seq": int(seq),
        "type": str(type_),
        "component": str(component),
        "data": data,
        "requestId": None if request_id is None else str(request_id),
        "createdAt": _CREATED_AT.to_representation(created_at),
    }


class ItemPageSerializer(serializers.Serializer):
    sessionId = serializers.CharField()
    items = ItemSerializer(many=True)
    next = serializers.IntegerField(help_text="Pass as `after` to read on.")


# The input keys that say what a run is working on: a mailbox post's notify input
# (postId, body, author), a delegated post's message, a board row's task.
WORKING_ON_KEYS = ("postId", "body", "author", "message", "boardId", "taskId", "thread")
WORKING_ON_CHARS = 500


def working_on(input: object) -> dict:
    """What a run's request input says it is working on: its ``WORKING_ON_KEYS``, each
    text cut to ``WORKING_ON_CHARS`` characters."""
    if not isinstance(input, dict):
        return {}
    picked = {key: input[key] for key in WORKING_ON_KEYS if key in input}
    return {key: value[:WORKING_ON_CHARS] if isinstance(value, str) else value for key, value in picked.items()}


class RunSerializer(serializers.Serializer):
    """One active run: ``{sessionId, flowId, flowKind, status: "active", requestId,
    action, startedAt, startedBy, workingOn}``. ``flowId`` is the address of who runs it
    (the seat or delegate: the child session's id after ``<parent id>:``)."""

    sessionId = serializers.CharField(source="session.session_id")
    flowId = serializers.SerializerMethodField()
    flowKind = serializers.CharField(source="session.flow_kind")
    status = serializers.SerializerMethodField()
    requestId = serializers.CharField(source="request_id")
    action = serializers.CharField()
    startedAt = serializers.DateTimeField(source="started_at", allow_null=True)
    startedBy = serializers.CharField(source="parent_request.request_id", allow_null=True, default=None)
    workingOn = serializers.SerializerMethodField()

    def get_flowId(self, row: Request) -> str:
        session = row.session
        parent = session.parent  # no query when it has none
        prefix = f"{parent.session_id}:" if parent is not None else ""
        return session.session_id.removeprefix(prefix)

    def get_status(self, row: Request) -> str:
        return "active"

    def get_workingOn(self, row: Request) -> dict:
        return working_on(row.input)


class FailedRunSerializer(RunSerializer):
    """One failed run: a run's keys with ``status: "failed"``, ``finishedAt`` and
    ``error`` (``{reason, message}``: the model's error under ``model-error``)."""

    finishedAt = serializers.DateTimeField(source="finished_at", allow_null=True)
    error = serializers.JSONField(allow_null=True)

    def get_status(self, row: Request) -> str:
        return "failed"


class RunPageSerializer(serializers.Serializer):
    sessionId = serializers.CharField()
    runs = RunSerializer(many=True)


class FailedRunPageSerializer(serializers.Serializer):
    sessionId = serializers.CharField()
    runs = FailedRunSerializer(many=True)


class AnyRunSerializer(RunSerializer):
    """The schema of a run either page lists (documentation only): a failed run also
    carries ``finishedAt`` and ``error``. One schema for both answers, since an empty
    page is both."""

    finishedAt = serializers.DateTimeField(required=False, allow_null=True, help_text="`status=failed` only")
    error = serializers.JSONField(required=False, allow_null=True, help_text="`status=failed` only: `{reason, message}`")


class RunsAnswerSerializer(serializers.Serializer):
    """``GET /api/sessions/{id}/runs``'s answer, as documented (documentation only)."""

    sessionId = serializers.CharField()
    runs = AnyRunSerializer(many=True)


class RequestPageSerializer(serializers.Serializer):
    sessionId = serializers.CharField()
    requests = RequestSerializer(many=True)


__all__ = ["ActionCallSerializer", "RequestSerializer", "ItemSerializer", "Item", "item_wire"]
