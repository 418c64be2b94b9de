"""The router's I/O drivers: the channels (HTTP, files, Stack), the delivery pump (asyncio) and
the sqlite3 readers with :class:`~.storage.RouterStore`.  The router's other modules are sans-I/O."""
