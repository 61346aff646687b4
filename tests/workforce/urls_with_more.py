"""The project's URLconf with one more endpoint, as another app would add it (``GET
/api/probes``), which the index must list by itself."""

from django.urls import path
from rest_framework.response import Response
from rest_framework.views import APIView

from workforce_project.urls import handler500  # noqa: F401
from workforce_project.urls import urlpatterns as project_urlpatterns


class ProbeList(APIView):
    """The organization's probes (an endpoint no app has)."""

    def get(self, request):
        return Response({"count": 0, "next": None, "previous": None, "results": []})


urlpatterns = [path("api/probes", ProbeList.as_view(), name="probes"), *project_urlpatterns]
