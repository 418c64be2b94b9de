"""The router (DESIGN §10 first half; seed 002): events → rules → durable deliveries on channels.

Sans-I/O core: :mod:`.model` (values), :mod:`.render` (templates, messages), :mod:`.route`
(matching, dedup, throttle), :mod:`.attempt` (the one gate every attempt goes through, outcomes,
the retry ladder); store ops: :mod:`.ops`; config: :mod:`.config`; I/O drivers in :mod:`.io`: :mod:`.io.channels`,
:mod:`.io.pump`, :mod:`.io.storage` (the sqlite3 readers, ``RouterStore``).
How the runtime plugs it in: ``docs/router.md``."""
