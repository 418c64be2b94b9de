"""The composition root (:mod:`.root`: ``SidecarApp``) and its concepts: time, inputs, deliveries,
batches, step groups, the router's and the senders' app components, the wire views."""
