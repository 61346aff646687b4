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


class ItemSerializer(serializers.Serializer):
    seq = serializers.IntegerField()
    type = serializers.CharField()
    component = serializers.CharField()
    data = serializers.JSONField()
    requestId = serializers.CharField(source="request.request_id", allow_null=True, default=None)
    createdAt = serializers.DateTimeField(source="created_at")


class ItemPageSerializer(serializers.Serializer):
    sessionId = serializers.CharField()
    items = ItemSerializer(many=True)
    next = serializers.IntegerField(help_text="Pass as `after` to read on.")


class RequestPageSerializer(serializers.Serializer):
    sessionId = serializers.CharField()
    requests = RequestSerializer(many=True)


__all__ = ["ActionCallSerializer", "RequestSerializer", "ItemSerializer", "Item"]
