"""Paging of the API's lists of things (``GET /api/boards`` and the like): DRF's usual
shape, ``{count, next, previous, results}``, sized by ``limit`` and ``offset``."""

from __future__ import annotations

from collections.abc import Sequence

from drf_spectacular.utils import OpenApiParameter, inline_serializer
from rest_framework import serializers
from rest_framework.pagination import LimitOffsetPagination
from rest_framework.request import Request as HttpRequest
from rest_framework.response import Response

from .views import int_param


class ListPagination(LimitOffsetPagination):
    """DRF's limit/offset paging: ``limit`` 1 to 1000 (default 100), ``offset`` from 0;
    ``next`` and ``previous`` are the neighbouring pages' URLs, or null. A ``limit`` or
    ``offset`` that is not a whole number in range is refused (400 ``invalid-input``), as
    the cursor-paged lists refuse theirs: DRF's own paging silently ignored ``limit=-1``
    and took ``offset=1e20`` as a huge offset."""

    default_limit = 100
    max_limit = 1000

    def get_limit(self, request: HttpRequest) -> int:
        """``limit``: 1 to ``max_limit``, default ``default_limit``.

        Raises:
            Refusal("invalid-input"): not a whole number in range.
        """
        return int_param(request, self.limit_query_param, self.default_limit, minimum=1, maximum=self.max_limit)

    def get_offset(self, request: HttpRequest) -> int:
        """``offset``: from 0 (default 0), at most ``LARGEST_WHOLE``.

        Raises:
            Refusal("invalid-input"): not a whole number in range.
        """
        return int_param(request, self.offset_query_param, 0)


PAGE_PARAMETERS = [
    OpenApiParameter("limit", int, description="At most this many results (1-1000, default 100)"),
    OpenApiParameter("offset", int, description="Skip this many results first (default 0)"),
]


def page_schema(name: str, serializer: type[serializers.Serializer]) -> serializers.Serializer:
    """The schema of one page of ``serializer``'s rows, as component ``name``."""
    return inline_serializer(
        name,
        {
            "count": serializers.IntegerField(help_text="Results on every page together."),
            "next": serializers.URLField(allow_null=True, help_text="The next page, or null."),
            "previous": serializers.URLField(allow_null=True, help_text="The previous page, or null."),
            "results": serializer(many=True),
        },
    )


def page_response(request: HttpRequest, view, rows: Sequence, serializer: type[serializers.Serializer]) -> Response:
    """One page of ``rows`` (a list or a queryset), each through ``serializer``."""
    paginator = ListPagination()
    # The ignore: the DRF stubs take a QuerySet only; LimitOffsetPagination slices any sequence.
    page: list | None = paginator.paginate_queryset(rows, request, view=view)  # type: ignore[arg-type]
    return paginator.get_paginated_response(serializer(page, many=True, context={"request": request}).data)
