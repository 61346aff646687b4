from django.db import migrations

# Each mailbox's counter starts at its last line (the counter replaces MAX(seq) + 1).
COUNT = """
UPDATE workforce_session SET line_seq = (
    SELECT MAX(seq) FROM mailboxes_line WHERE mailboxes_line.session_id = workforce_session.id
)
WHERE EXISTS (SELECT 1 FROM mailboxes_line WHERE mailboxes_line.session_id = workforce_session.id)
"""


class Migration(migrations.Migration):
    """Sets ``Session.line_seq`` of every session with lines to its last line's ``seq``."""

    dependencies = [
        ("mailboxes", "0005_rooms_and_inventory"),
        ("workforce", "0003_session_line_seq"),
    ]

    # elidable: an empty database has no lines to count (workforce_project.migrating
    # creates a new database from the models and skips it).
    operations = [migrations.RunSQL(COUNT, migrations.RunSQL.noop, elidable=True)]
