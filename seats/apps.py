from django.apps import AppConfig


class SeatsConfig(AppConfig):
    name = "seats"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from workforce.leases import register_work_table
        from workforce.sweepers import register_sweep

        from . import checks  # noqa: F401  (registers the worker checks)
        from .agent import register
        from .drains import do_sweep_board_drains
        from .models import DrainWake
        from .turns import do_sweep_turn_waits

        register()
        # Board rows a crashed worker or the broker dropped, from each cluster worker
        # (workforce.sweepers).
        register_work_table(DrainWake, "ran_at")
        register_sweep("board drains", do_sweep_board_drains)
        # Callers waiting on a seat's turn slot whose holder died (seats.turns).
        register_sweep("turn slots", do_sweep_turn_waits)
