"""``python -m zklocks``: the ``zklocks`` command, for when its script is not on PATH."""

from zklocks.cli import main

main(prog_name="zklocks")
