"""Settings for ``bench/breakit.py``'s server: the real settings, keeping every task
result (``save_limit: 0``, django-q2's "no pruning"), so the tasks the cluster ran can
be counted afterwards, and the API's throttles off (the load is its own posters')."""

from workforce_project.settings import *  # noqa: F401,F403
from workforce_project.settings import Q_CLUSTER

Q_CLUSTER = {**Q_CLUSTER, "save_limit": 0}
WORKFORCE_THROTTLE_USER = WORKFORCE_THROTTLE_ORG = WORKFORCE_THROTTLE_READ_USER = WORKFORCE_THROTTLE_READ_ORG = ""
