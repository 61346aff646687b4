"""A board row's lease is a ``workforce.models.Lease``: ``lease_expires_at`` is renamed
``lease_until`` in place (the column keeps its values, so a row claimed at the upgrade
keeps its lease), and the check that ties the lease to ``in_progress`` names the new
column."""

from django.db import migrations, models
from django.db.models import Q


class Migration(migrations.Migration):
    dependencies = [("boards", "0001_initial")]

    operations = [
        migrations.RemoveConstraint(model_name="boardtask", name="boardtask_lease_iff_in_progress"),
        migrations.RenameField(model_name="boardtask", old_name="lease_expires_at", new_name="lease_until"),
        migrations.AddConstraint(
            model_name="boardtask",
            constraint=models.CheckConstraint(
                condition=(Q(status="in_progress") & Q(lease_until__isnull=False) & Q(claim_token__isnull=False))
                | (~Q(status="in_progress") & Q(lease_until__isnull=True) & Q(claim_token__isnull=True)),
                name="boardtask_lease_iff_in_progress",
            ),
        ),
    ]
