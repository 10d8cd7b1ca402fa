#!/bin/sh
# The README tour's nightly job. A real one would dump a database, keyed to the tick it runs for
# (SCHEDCTL_SCHEDULED_FOR), so that a run repeated after a failure writes the same dump again.
echo "backup-db: would dump the database for ${SCHEDCTL_SCHEDULED_FOR:-a manual run}"
