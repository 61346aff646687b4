"""The project's URLconf with one more endpoint, as another app would add it (``GET
/api/workers``, which the index must list by itself when it lands)."""

from django.urls import path
from rest_framework.response import Response
from rest_framework.views import APIView

from workforce_project.urls import handler500  # noqa: F401
from workforce_project.urls import urlpatterns as project_urlpatterns


class WorkerListProbe(APIView):
    """The organization's workers (a stand-in for the real list)."""

    def get(self, request):
        return Response({"count": 0, "next": None, "previous": None, "results": []})


urlpatterns = [path("api/workers", WorkerListProbe.as_view(), name="workers"), *project_urlpatterns]
