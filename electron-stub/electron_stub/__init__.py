"""The stub Electron harness: replays scenarios against the sidecar (see electron-stub/README.md)."""
