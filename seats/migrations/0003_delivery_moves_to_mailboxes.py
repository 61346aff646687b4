# Deliveries belong to the mailbox that fans a post out: the model moved to the
# mailboxes app (mailboxes.0004_delivery). Only Django's state changes; the table
# seats_delivery and its rows stay where they are.

from django.db import migrations


class Migration(migrations.Migration):

    dependencies = [
        ('seats', '0002_requeues'),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[migrations.DeleteModel(name='Delivery')],
            database_operations=[],
        ),
    ]
