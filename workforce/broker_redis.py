"""django-q2's Redis broker as the cluster uses it (``Q_CLUSTER["broker_class"]`` with a
``redis://`` ``WORKFORCE_BROKER_URL``), apart from ``workforce.broker`` so that a server
on the ORM broker never imports the redis client."""

from __future__ import annotations

from django_q.brokers.redis_broker import Redis

from .broker import ClusterConnections, _front


class ClusterRedis(ClusterConnections, Redis):
    """django-q2's Redis broker, unchanged but for ``ClusterConnections`` (the cluster's
    processes keep their database connections) and ``workforce.broker.to_the_front``."""

    def enqueue(self, task):
        """Append the task to the queue, or, inside ``to_the_front``, keep it for the
        head of the queue."""
        front = getattr(_front, "tasks", None)
        if front is not None:
            front.append(task)
            return len(front)
        return super().enqueue(task)
