"""Settings for ``bench/breakit.py``'s server: the real settings, keeping every task
result (``save_limit: 0``, django-q2's "no pruning"), so the tasks the cluster ran can
be counted afterwards. Nothing else differs."""

from workforce_project.settings import *  # noqa: F401,F403
from workforce_project.settings import Q_CLUSTER

Q_CLUSTER = {**Q_CLUSTER, "save_limit": 0}
