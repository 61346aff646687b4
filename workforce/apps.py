from django.apps import AppConfig


class WorkforceConfig(AppConfig):
    name = "workforce"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from django.contrib.auth.signals import user_logged_in, user_login_failed
        from django_q.signals import post_spawn

        from . import checks  # noqa: F401  (registers the system checks)
        from .logins import on_logged_in, on_login_failed
        from .sweepers import on_worker_spawn

        # Failed logins are counted for the login views' throttle (workforce.logins).
        user_login_failed.connect(on_login_failed, dispatch_uid="workforce.logins.on_login_failed")
        user_logged_in.connect(on_logged_in, dispatch_uid="workforce.logins.on_logged_in")
        # Cluster workers boot and run the sweeps the apps register (workforce.sweepers).
        post_spawn.connect(on_worker_spawn, dispatch_uid="workforce.sweepers.on_worker_spawn")
