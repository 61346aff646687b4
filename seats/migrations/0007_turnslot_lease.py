"""A turn slot's hold is a ``workforce.models.Lease``: ``holder`` is renamed
``claim_token`` and ``held_until`` ``lease_until``, in place (the columns keep their
values: a slot held at the upgrade stays held by the same turn until it frees it or its
hold lapses)."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [("seats", "0006_turnslot_waiting")]

    operations = [
        migrations.RenameField(model_name="turnslot", old_name="holder", new_name="claim_token"),
        migrations.RenameField(model_name="turnslot", old_name="held_until", new_name="lease_until"),
    ]
