"""The sender-health machine's I/O side: the sqlite3 readers (the machine itself is sans-I/O)."""
