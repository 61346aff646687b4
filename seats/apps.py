from django.apps import AppConfig

from . import constants as c

# The roster's refusals (seats.roster): not on your roster 404, a WORKER.md refused 400.
REASONS = {
    c.NOT_ON_ROSTER: 404,
    c.ALREADY_ON_ROSTER: 409,
    c.NOT_YOUR_OWN: 409,
    c.INVALID_WORKER: 400,
    c.OFFICE_HAS_NO_ROSTER: 403,
    c.SEAT_BUSY: 409,
}


class SeatsConfig(AppConfig):
    name = "seats"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:

        from django.db.models import Q

        from workforce.holders import register_leased
        from workforce.leases import register_work_table
        from workforce.refusals import register_reasons
        from workforce.sweepers import register_sweep

        from . import checks  # noqa: F401  (registers the worker checks)
        from .agent import register
        from .drains import do_sweep_board_drains
        from .models import DrainWake, TurnSlot
        from .turns import do_sweep_turn_waits

        register()
        register_reasons(REASONS)
        # Board rows a crashed worker or the broker dropped, from each cluster worker
        # (workforce.sweepers).
        register_work_table(DrainWake, "ran_at")
        register_sweep("board drains", do_sweep_board_drains)
        # Callers waiting on a seat's turn slot whose holder died (seats.turns).
        register_sweep("turn slots", do_sweep_turn_waits)
        # A turn whose process died frees its slot at once (workforce.holders): its hold
        # lapses now and the "turn slots" sweep wakes who waits.
        register_leased(TurnSlot, held=~Q(claim_token=""))
