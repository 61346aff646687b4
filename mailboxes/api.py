"""HTTP reads specific to mailboxes: the durable, paged transcript (spec "What the
transcript proves, and what it doesn't"), the inventory (spec "What a mailbox is"), and
projects (spec "A room per project")."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiParameter, extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.request import Request as HttpRequest
from rest_framework.response import Response
from rest_framework.views import APIView

from workforce.api.views import int_param, read_page
from workforce.principals import resolve_principal

from .inventory import access_inventory_seat, list_inventory_mailboxes, list_seat_mailboxes
from .queries import access_mailbox_session, list_transcript


class TranscriptView(APIView):
    """The whole durable transcript of a mailbox, paged, beyond the history window."""

    @extend_schema(
        parameters=[
            OpenApiParameter("after", int, description="Only lines with seq above this (default 0)"),
            OpenApiParameter("limit", int, description="At most this many lines (1-1000, default 100)"),
        ],
        responses={
            200: inline_serializer(
                "TranscriptPage",
                {
                    "mailboxId": serializers.CharField(),
                    "lines": serializers.ListField(child=serializers.DictField()),
                    "next": serializers.IntegerField(allow_null=True),
                },
            )
        },
        summary="Read a mailbox's durable transcript",
    )
    def get(self, request: HttpRequest, mailbox_id: str) -> Response:
        principal = resolve_principal(request, request.query_params.get("userId"), require_user=False)
        session = access_mailbox_session(principal.org, mailbox_id, reader=principal.reader)
        after = int_param(request, "after", 0)
        lines, next_seq = read_page(
            request, lambda n: list_transcript(session, after=after, limit=n), next_of=lambda line: line.seq
        )
        return Response(
            {
                "mailboxId": session.session_id,
                "lines": [{"seq": line.seq, **line.as_wire()} for line in lines],
                "next": next_seq,
            }
        )


class MailboxListView(APIView):
    """The organization's mailboxes, from the inventory (spec "What a mailbox is"), by id, paged."""

    @extend_schema(
        parameters=[
            OpenApiParameter("after", str, description="Only mailboxes whose id sorts after this one"),
            OpenApiParameter("limit", int, description="At most this many (1-1000, default 100)"),
        ],
        responses={
            200: inline_serializer(
                "MailboxInventoryPage",
                {
                    "mailboxes": serializers.ListField(child=serializers.DictField()),
                    "next": serializers.CharField(allow_null=True),
                },
            )
        },
        summary="List the organization's mailboxes (the inventory)",
    )
    def get(self, request: HttpRequest) -> Response:
        principal = resolve_principal(request, request.query_params.get("userId"), require_user=False)
        after = request.query_params.get("after") or ""
        rows, next_id = read_page(
            request,
            lambda n: list_inventory_mailboxes(principal.org, after=after, limit=n),
            next_of=lambda row: row.mailbox_id,
        )
        return Response({"mailboxes": [row.as_wire() for row in rows], "next": next_id})


class SeatMailboxesView(APIView):
    """The mailboxes one seat is a member of, from the inventory."""

    @extend_schema(
        responses={
            200: inline_serializer(
                "SeatMailboxes",
                {"seat": serializers.DictField(), "mailboxes": serializers.ListField(child=serializers.DictField())},
            )
        },
        summary="List the mailboxes a seat is in (the inventory)",
    )
    def get(self, request: HttpRequest, seat_id: str) -> Response:
        principal = resolve_principal(request, request.query_params.get("userId"), require_user=False)
        seat = access_inventory_seat(principal.org, seat_id, reader=principal.user_id)
        rows = list_seat_mailboxes(principal.org, seat_id)
        return Response({"seat": seat, "mailboxes": [row.as_wire() for row in rows]})
