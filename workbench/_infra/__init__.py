"""Private infrastructure: durable writes, locks, processes, SQLite caches, threads, progress.

Nothing here is public API; the domain packages use it."""
