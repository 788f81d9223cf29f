"""The asyncio front end: the same flows, driven with ``await`` on the caller's loop."""
