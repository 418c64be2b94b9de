"""The router (DESIGN §10 first half; seed 002): events → rules → durable deliveries on channels.

Sans-I/O core: :mod:`.model`, :mod:`.match`, :mod:`.render`, :mod:`.route`, :mod:`.policy`,
:mod:`.gate`; storage: :mod:`.storage`; I/O: :mod:`.config`, :mod:`.channels`, :mod:`.pump`.
How the runtime plugs it in: ``docs/router.md``."""
