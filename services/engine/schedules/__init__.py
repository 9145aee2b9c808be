"""Scheduled runs: one module per job.

- ``cron``: a cron expression in a time zone (croniter), its ticks;
- ``models``: the ``schedules`` table; ``repository``: its SQL, including
  the claim of a tick;
- ``service``: the rules of creating, listing, pausing, resuming and
  deleting schedules; ``servicer``: ScheduleService over it;
- ``scheduler``: the loop that claims due ticks and starts their runs;
- ``project_access``: who may see and change what is attached to an agent
  of a shared project (its schedules, and its default webhook)."""
