"""The sync front end: a driver that runs the flows on blocking session calls."""
