"""The engine's leases (services.shared.lease): periodic work one replica
does per interval, such as the retention prune."""

from __future__ import annotations

from services.shared.lease import LeaseRow


class EngineLease(LeaseRow, table=True):
    __tablename__ = "engine_leases"
