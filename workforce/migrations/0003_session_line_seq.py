from django.db import migrations, models


class Migration(migrations.Migration):
    """``Session.line_seq``: the last transcript line number handed out on the session,
    bumped with ``item_seq`` (the lines of existing mailboxes are counted by
    ``mailboxes.0006_count_line_seq``)."""

    dependencies = [
        ("workforce", "0002_request_created_at_default"),
    ]

    operations = [
        migrations.AddField(
            model_name="session",
            name="line_seq",
            field=models.BigIntegerField(default=0),
        ),
    ]
