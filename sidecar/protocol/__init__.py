"""The bridge's method catalogue and wire structs: :mod:`.inbound` (params), :mod:`.outbound`
(notifications, requests), :mod:`.answers` (results, JSON Schema), :mod:`.methods`, :mod:`.paging`."""
