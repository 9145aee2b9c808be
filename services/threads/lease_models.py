"""The threads service's leases (services.shared.lease): periodic work one
replica does per interval, such as the retention prune."""

from __future__ import annotations

from services.shared.lease import LeaseRow


class ThreadsLease(LeaseRow, table=True):
    __tablename__ = "threads_leases"
