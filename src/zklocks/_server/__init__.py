"""The parts of ``zklocks.server``, which re-exports every public name from here.

``options`` (the zoo.cfg settings as one checked value), ``tls`` and ``sasl`` (what they
add to zoo.cfg and the JVM), ``loopback`` (free ports and four-letter words),
``process`` (one JVM's lifecycle), ``leftovers`` (what kills it if we cannot) and
``errors`` (what starting one raises). Where ZooKeeper and Java are found stays in
``zklocks.server`` (tests hide ``SYSTEM_JAR_DIRS`` there), which hands the lookup to
each process as an argument.
Nothing in the lock engine imports this package (an import contract says so).
"""
