from django.apps import AppConfig


class WorkforceConfig(AppConfig):
    name = "workforce"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from django.contrib.auth.signals import user_logged_in, user_login_failed
        from django.core.signals import got_request_exception
        from django.db.models.signals import post_delete, post_save
        from django_q.signals import post_spawn, pre_execute

        from . import checks  # noqa: F401  (registers the system checks)
        from .logins import on_logged_in, on_login_failed
        from .models import Organization
        from .org_cache import on_organization_deleted, on_organization_saved, on_request_exception
        from .sweepers import on_task_start, on_worker_spawn

        # Failed logins are counted for the login views' throttle (workforce.logins).
        user_login_failed.connect(on_login_failed, dispatch_uid="workforce.logins.on_login_failed")
        user_logged_in.connect(on_logged_in, dispatch_uid="workforce.logins.on_logged_in")
        # Cluster workers boot and run the sweeps the apps register (workforce.sweepers).
        post_spawn.connect(on_worker_spawn, dispatch_uid="workforce.sweepers.on_worker_spawn")
        pre_execute.connect(on_task_start, dispatch_uid="workforce.sweepers.on_task_start")
        # The cached Organization rows go when this process deletes or edits one, and
        # when a stale one may have failed a view's foreign key (workforce.org_cache).
        post_delete.connect(on_organization_deleted, sender=Organization, dispatch_uid="workforce.org_cache.deleted")
        post_save.connect(on_organization_saved, sender=Organization, dispatch_uid="workforce.org_cache.saved")
        got_request_exception.connect(on_request_exception, dispatch_uid="workforce.org_cache.request_exception")
        _register_recovery()


def _register_recovery() -> None:
    """What frees a dead or interrupted holder's work at once (``workforce.holders``):
    every ``LeasedWork`` table's claims are holds; the first sweeps of each pass release
    the holds of processes that are gone and enqueue again the tasks this process gave
    up on during a database outage; with the Redis broker a one-second timer watches for
    the broker losing its queue (``workforce.broker_watch.do_watch_broker``)."""
    from django.apps import apps
    from django.conf import settings

    from .broker_watch import do_watch_broker
    from .holders import do_enqueue_outage_retries, do_release_dead_holders, register_leased
    from .models import LeasedWork
    from .sweepers import register_sweep

    for model in apps.get_models():
        if issubclass(model, LeasedWork):
            register_leased(model)
    register_sweep("dead holders", do_release_dead_holders)
    register_sweep("outage retries", do_enqueue_outage_retries)
    if settings.Q_CLUSTER.get("redis"):
        register_sweep("broker", do_watch_broker, every=1.0)
