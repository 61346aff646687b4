"""Test settings: django-q2 runs tasks synchronously (django-q2 reads Q_CLUSTER at
import, so ``override_settings`` cannot switch ``sync`` on)."""

from .settings import *  # noqa: F401,F403
from .settings import Q_CLUSTER

Q_CLUSTER = {**Q_CLUSTER, "sync": True}
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
# No API throttling unless a test turns it on (tests/workforce/test_throttles.py does).
WORKFORCE_THROTTLE_USER = WORKFORCE_THROTTLE_ORG = WORKFORCE_THROTTLE_READ_USER = WORKFORCE_THROTTLE_READ_ORG = ""
# No backlog bound unless a test turns it on (tests/*/test_backlog.py do): its count is
# kept a second per process, so with it on a test's exact query count would depend on
# when the count was last made.
WORKFORCE_BACKLOG_LIMIT = 0
