"""In-process hand-off of run outcomes: waiters get a run's end from the executor that ended it.

When the executor and the waiting call share a process, the executor hands the terminal state it
has just committed to the waiter directly, so the waiter needs no read of the run row. Waiters in
other processes keep LISTEN/NOTIFY plus a read.

While a completion of a run is in flight here ("settling"), a process-state NOTIFY for that run
is held back (the completion itself will hand over its outcome, or wake the waiters if it ends
without one), so a waiter never reads a row it is about to be handed.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from runtime.scheduler.models import RunSnapshot

# Called with the committed terminal snapshot, or None for "read the run yourself".
Receiver = Callable[[RunSnapshot | None], None]


class Settlement:
    """One in-flight completion of a run; hand() passes its committed terminal state on."""

    def __init__(self) -> None:
        self.snapshot: RunSnapshot | None = None
        # How many waiters of this process were handed the snapshot (set on exit).
        self.delivered = 0

    def hand(self, snapshot: RunSnapshot) -> None:
        """Record the terminal state committed by this completion (delivered on exit)."""
        self.snapshot = snapshot


class OutcomeHub:
    """Routes committed run outcomes to the in-process waiters of each run."""

    def __init__(self) -> None:
        self._receivers: dict[str, set[Receiver]] = {}
        self._settling: Counter[str] = Counter()
        self._held: set[str] = set()

    def subscribe(self, process_id: str, receiver: Receiver) -> Callable[[], None]:
        """Receive the run's outcomes until the returned function is called."""
        self._receivers.setdefault(process_id, set()).add(receiver)

        def unsubscribe() -> None:
            receivers = self._receivers.get(process_id)
            if receivers is not None:
                receivers.discard(receiver)
                if not receivers:
                    del self._receivers[process_id]

        return unsubscribe

    def waits_here(self, process_id: str) -> bool:
        """Whether a waiter of this process receives the run's outcomes now."""
        return bool(self._receivers.get(process_id))

    def hold(self, process_id: str) -> bool:
        """True (and remember it) when a NOTIFY for the run arrives while it settles here."""
        if self._settling[process_id] <= 0:
            return False
        self._held.add(process_id)
        return True

    @contextmanager
    def settling(self, process_id: str) -> Iterator[Settlement]:
        """Mark a completion of the run in flight; deliver what it handed once it is done.

        Call hand() only after the transaction committed. A completion that ends without a
        terminal state (an error, a lost lease, or more tasks to run) wakes the waiters to read
        if a notification was held back meanwhile, or on any error.
        """
        settlement = Settlement()
        self._settling[process_id] += 1
        failed = False
        try:
            yield settlement
        except BaseException:
            failed = True
            raise
        finally:
            self._settling[process_id] -= 1
            if self._settling[process_id] <= 0:
                del self._settling[process_id]
                held = process_id in self._held
                self._held.discard(process_id)
            else:
                held = False
            if settlement.snapshot is not None:
                settlement.delivered = self._deliver(process_id, settlement.snapshot)
            elif failed or held:
                self._deliver(process_id, None)

    def _deliver(self, process_id: str, snapshot: RunSnapshot | None) -> int:
        receivers = tuple(self._receivers.get(process_id, ()))
        for receiver in receivers:
            receiver(snapshot)
        return len(receivers)


# One per process: executors and waiters of any Database in this process meet here (run ids
# are unique, so runs of different databases never collide).
HUB = OutcomeHub()
