"""The ``zklocks`` command line, one module per command (``zklocks.cli`` assembles them)."""
