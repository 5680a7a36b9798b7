"""PartitionState (the ReplayBuffer's incremental state) against a recount from the listing.

Random sequences of puts, overwrites, clears, snapshots and expectations, with sessions that
emit several outputs: after every change the state's readiness, failures, missing counts and
batch order equal what a full recount of the listing gives (what the ReplayBuffer computed on
every wake before it kept its state incrementally).
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from rlctl.dataplane.contract import TERMINAL_STATUSES, TagChanges
from rlctl.dataplane.sample_view import PartitionState
from rlctl.protocol.kv import make_key, parse_key

UIDS = ("ua", "ub", "uc")
KEYS = [make_key(u, s, i) for u in UIDS for s in range(3) for i in range(3)]
STATUSES = ("running", "success", "failure")

puts = st.tuples(st.just("put"), st.lists(st.tuples(st.sampled_from(KEYS),
                                                   st.sampled_from(STATUSES)), max_size=5))
clears = st.tuples(st.just("clear"), st.lists(st.sampled_from(KEYS), max_size=4))
snapshots = st.tuples(st.just("snapshot"), st.none())
expects = st.tuples(st.just("expect"), st.tuples(st.sampled_from(UIDS), st.integers(1, 3),
                                                 st.integers(0, 1)))
forgets = st.tuples(st.just("forget"), st.sampled_from(UIDS))
operations = st.lists(st.one_of(puts, clears, snapshots, expects, forgets), max_size=30)


class Model:
    """The listing, the expectations, and the changes answer each operation makes."""

    def __init__(self) -> None:
        self.listing: dict[str, dict] = {}
        self.expected: dict[str, tuple[int, int]] = {}  # uid -> (count, step)
        self.version = 0

    def changes(self, op: str, arg) -> TagChanges | None:
        self.version += 1
        if op == "put":
            changed = {key: {"status": status, "error": f"e-{key}"} for key, status in arg}
            self.listing.update(changed)
            return TagChanges(self.version, {k: dict(t) for k, t in changed.items()})
        if op == "clear":
            removed = tuple(k for k in dict.fromkeys(arg) if k in self.listing)
            for key in removed:
                del self.listing[key]
            return TagChanges(self.version, {}, removed)
        if op == "snapshot":
            return TagChanges(self.version, {k: dict(t) for k, t in self.listing.items()},
                              complete=True)
        return None

    def recount(self, step: int) -> dict:
        """What a full listing says of ``step``: missing uids, failed uids, batch keys."""
        uids = [u for u, (_, s) in self.expected.items() if s == step]
        missing, failed, keys = {}, set(), []
        for uid in uids:
            mine = sorted((parse_key(k)[1:], k) for k in self.listing if parse_key(k)[0] == uid)
            done = {p[0] for p, k in mine if self.listing[k]["status"] in TERMINAL_STATUSES}
            want = self.expected[uid][0]
            if len(done) < want:
                missing[uid] = (len(done), want)
            if any(self.listing[k]["status"] == "failure" for _, k in mine):
                failed.add(uid)
            keys += [k for _, k in mine]
        return {"missing": missing, "failed": failed, "keys": keys}


@settings(max_examples=300, deadline=None)
@given(operations)
def test_the_state_equals_a_recount_after_every_change(ops):
    model, state = Model(), PartitionState()
    for op, arg in ops:
        if op == "expect":
            uid, count, step = arg
            model.expected.pop(uid, None)  # added again: its new step and count win
            model.expected[uid] = (count, step)
            state.expect(uid, count, step)
        elif op == "forget":
            model.expected.pop(arg, None)
            state.forget(arg)
        else:
            state.apply(model.changes(op, arg))
        assert state.expected() == {u: s for u, (_, s) in model.expected.items()}
        for number, step in state.steps.items():
            want = model.recount(number)
            assert PartitionState.missing(step) == want["missing"]
            assert step.incomplete == len(want["missing"])
            assert set(step.failures) == want["failed"]
            for uid, message in step.failures.items():
                assert message.startswith(uid) and "e-" + message.split(":")[0] in message
            assert list(state.meta("train", step).keys) == want["keys"]


def test_a_terminal_output_put_again_counts_once_when_cleared():
    """Session 0 emits two outputs; its first is put as a success twice (an overwrite, not a
    second output): clearing it and then the other leaves the session not done."""
    state, v = PartitionState(), iter(range(1, 100))
    first, second = make_key("ua", 0, 0), make_key("ua", 0, 1)
    state.expect("ua", 1, 0)
    for key in (first, first, second):
        state.apply(TagChanges(next(v), {key: {"status": "success"}}))
    step = state.steps[0]
    assert step.incomplete == 0
    state.apply(TagChanges(next(v), {}, (first,)))
    assert step.incomplete == 0  # the second output still says the session is done
    state.apply(TagChanges(next(v), {}, (second,)))
    assert step.incomplete == 1 and PartitionState.missing(step) == {"ua": (0, 1)}


def test_a_snapshot_recounts_multi_output_sessions_and_failures():
    """A snapshot (a watcher fallen behind) replaces everything: a failure cleared meanwhile
    is gone, and a session's outputs are counted from the snapshot alone."""
    state = PartitionState()
    keys = [make_key("ub", 0, i) for i in range(3)]
    state.expect("ub", 2, 5)
    state.apply(TagChanges(1, {k: {"status": "failure", "error": "x"} for k in keys}))
    step = state.steps[5]
    assert set(step.failures) == {"ub"} and PartitionState.missing(step) == {"ub": (1, 2)}
    snapshot = {keys[1]: {"status": "success"}, make_key("ub", 1, 0): {"status": "success"}}
    state.apply(TagChanges(9, snapshot, complete=True))
    assert step.failures == {} and step.incomplete == 0 and state.version == 9
    assert list(state.meta("train", step).keys) == [keys[1], make_key("ub", 1, 0)]
    state.apply(TagChanges(10, {}, (keys[1],)))
    assert PartitionState.missing(step) == {"ub": (1, 2)}


def test_a_steps_uid_tags_are_one_string_per_uid():
    """Tags that arrived put by put each bring their own copy of the uid; the sampled batch
    holds the uid the step added, once per uid (grouping compares pointers), and a tag that
    is not the key's uid (or not a plain str) is left as it came."""
    import pickle

    class Uid(str):
        pass

    state = PartitionState()
    uid = pickle.loads(pickle.dumps("ua"))  # an object of its own, as an added uid is
    state.expect(uid, 3, 0)
    copies = [pickle.loads(pickle.dumps("ua")) for _ in range(3)]
    assert all(c == uid and c is not uid for c in copies)
    tags = [{"uid": copies[0], "status": "success"}, {"uid": "ub", "status": "success"},
            {"uid": Uid("ua"), "status": "success"}]
    for v, (s, t) in enumerate(zip(range(3), tags, strict=True), start=1):
        state.apply(TagChanges(v, {make_key("ua", s, 0): t}))
    batch = state.meta("train", state.steps[0])
    got = batch.tag_values("uid")
    assert got == ["ua", "ub", "ua"]
    assert got[0] is uid and got[1] == "ub" and type(got[2]) is Uid
