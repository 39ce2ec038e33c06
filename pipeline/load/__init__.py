"""Load: what the warehouse remembers of each source and staging what was read (``state``), moving
rows into DuckDB (``spool``), and rebuilding the star rows of the sessions that changed (``star``)."""
