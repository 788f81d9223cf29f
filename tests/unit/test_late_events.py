"""Events that arrive late, from a watch of an earlier wait, never decide a grant alone.

* A wait that ends with ``SESSION_LOST`` asks whose session ended (simulator seed
  15640): the end of a session *before* the one that made our node must not make us
  start over (our live node would be left behind); the end of our own session must.
* The deletion of the one-node lock's ``lock`` may be an earlier holder's (the name is
  reused): a queued waiter behind it lists again instead of taking over (seed 96020).
"""

from __future__ import annotations

from flow_support import ATTEMPT, PATH, SESSION, Stepper, created, mine, spec, theirs, watched
from zklocks._core import nodes as _nodes
from zklocks._core.flow import Acquired, acquire
from zklocks._core.ops import Pipeline, SessionId
from zklocks._core.steps import Gone
from zklocks._protocol.errors import SessionExpiredError
from zklocks._protocol.records import Exists, GetChildren, Stat

OURS = Stat(czxid=100, ephemeral_owner=SESSION)  # created() gives our node this stat


def test_the_end_of_an_older_session_leaves_the_waiter_waiting_on_its_node() -> None:
    s = Stepper(acquire(spec()))
    s.expect(Pipeline, (created(mine(2)), [theirs(1), mine(2)]))
    s.wait(SessionExpiredError())  # an older session's watch, told late
    s.expect(SessionId, SESSION)  # the session that made our node: is it over?
    check = s.expect(Exists, OURS)  # no: our node is there
    assert check.path == f"{PATH}/{mine(2)}"
    op, _ = s.wait(Gone(f"{PATH}/{theirs(1)}"))  # the same blocker, watched again
    assert watched(op) == (f"{PATH}/{theirs(1)}",)
    s.expect(Exists, OURS)  # the takeover's proof
    assert s.done and s.result == Acquired(f"{PATH}/{mine(2)}", 100, SESSION)


def test_the_end_of_our_own_session_starts_over_with_no_request() -> None:
    s = Stepper(acquire(spec()))
    s.expect(Pipeline, (created(mine(2)), [theirs(1), mine(2)]))
    s.wait(SessionExpiredError())
    s.expect(SessionId, SESSION + 1)  # a new session: ours ended, our node with it
    op = s.expect(Pipeline, (created(mine(5), czxid=300), [mine(5)]))
    assert op.requests[0].path == f"{PATH}/lock-{ATTEMPT}-"
    assert s.done and s.result == Acquired(f"{PATH}/{mine(5)}", 300, SESSION)


def test_a_session_end_not_yet_replaced_is_settled_by_our_node() -> None:
    """The driver may still report the expired session's id: the node decides."""
    s = Stepper(acquire(spec()))
    s.expect(Pipeline, (created(mine(2)), [theirs(1), mine(2)]))
    s.wait(SessionExpiredError())
    s.expect(SessionId, SESSION)
    s.expect(Exists, SessionExpiredError())  # our node went with it
    s.expect(Pipeline, (created(mine(5), czxid=300), [mine(5)]))
    assert s.done and s.result.node == f"{PATH}/{mine(5)}"


def test_a_waiter_behind_the_one_node_lock_lists_again_when_lock_goes() -> None:
    single = _nodes.SINGLE_NODE
    s = Stepper(acquire(spec()))
    s.expect(Pipeline, (created(mine(2)), [single, mine(2)]))
    s.wait(Gone(f"{PATH}/{single}"))  # perhaps an earlier holder's lock node
    s.expect(GetChildren, [single, mine(2)])  # a new holder's lock is there: wait on it
    op, _ = s.wait(Gone(f"{PATH}/{single}"))
    assert watched(op) == (f"{PATH}/{single}",)
    s.expect(GetChildren, [mine(2)])
    assert s.done and s.result == Acquired(f"{PATH}/{mine(2)}", 100, SESSION)
