"""Settings for benches that count every task the cluster ran: django-q2 keeps every
task's result (``save_limit`` 0), the rest as ``workforce_project.settings``."""

from workforce_project.settings import *  # noqa: F401,F403
from workforce_project.settings import Q_CLUSTER

Q_CLUSTER = {**Q_CLUSTER, "save_limit": 0}
