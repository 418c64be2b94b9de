"""Per-TU services (DESIGN §5).  ``default_services`` is the set every TU runs; a new service
(Follow-up mail, …) plugs in here without changes to the engine or the Task Factory."""
from __future__ import annotations

from typing import TYPE_CHECKING

from sidecar.services.base import Service

if TYPE_CHECKING:  # pragma: no cover
    from sidecar.runtime.tu import TuRuntime


def default_services(rt: "TuRuntime") -> list[Service]:
    from sidecar.services.inbound import InboundService
    from sidecar.services.passes import PassService

    from sidecar.services.follow_up_mail.service import FollowUpMailService
    from sidecar.services.follow_up_message import FollowUpMessageService

    return [PassService(rt), InboundService(rt), FollowUpMessageService(rt), FollowUpMailService(rt)]
