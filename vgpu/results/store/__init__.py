"""What a run records and where it is kept: the plain records, the store (SQLite or
PostgreSQL, with its migrations), copies between stores, and stored runs read back as
series of repeats. Uses only the statistics below it; never judges."""
