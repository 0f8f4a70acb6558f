"""Python API for custom training loops: check one step of an existing engine.

    engine, *_ = deepspeed.initialize(...)
    with dslint.preflight.guard(engine, timeout=60):
        loss = engine(batch)
        engine.backward(loss)
        engine.step()          # the dry step ends at this boundary: ranks compare through the store

On a pass the block goes on (and, with ``keep_watching=True``, the watchdog stays on for the rest of the
run).  On a divergence, hang or error every rank writes/prints the report and the process exits with the
pre-flight's exit code — after a disagreement the ranks cannot safely go on, and leaving together is what
keeps any of them from hanging.  Every rank must enter the guard at the same point.
"""

from __future__ import annotations

import contextlib
import itertools
from typing import Any, Iterator

from dslint.runtime_checks import engine_hooks
from dslint.runtime_checks.dry_step import DrySession, Options
from dslint.runtime_checks.watchdog import Watchdog

_guard_ids = itertools.count()


@contextlib.contextmanager
def guard(engine: Any = None, *, timeout: float = 120.0, steps: int = 1, report: str | None = None,
          keep_watching: bool = False) -> Iterator[DrySession]:
    """Run the block as a dry step of ``engine`` (any model: pass None to trace whatever runs)."""
    session = DrySession(Options(timeout=timeout, steps=steps, keep_going=True, report_path=report),
                         run_id=f"guard{next(_guard_ids)}")
    session.context.install()
    session.tracer.install()
    engine_hooks.install(session)
    if engine is not None:
        try:
            engine_hooks.install_engine(session)
        except ImportError:
            pass
        if hasattr(engine, "is_gradient_accumulation_boundary"):
            engine_hooks.observe_engine(session, engine)
        else:
            session.context.name_model(engine)
            session.models.append(engine)
    watchdog = Watchdog(session)
    watchdog.start()
    failure: BaseException | None = None
    try:
        yield session
    except BaseException as exc:
        failure = exc
        raise
    finally:
        if failure is not None and session.status in ("running", "done"):
            from dslint.runtime_checks.launch import fail

            fail(session, failure)  # exits: the peers are told and nobody waits for this rank
        if session.status == "running":
            session.finish("end of guard block")
        if not keep_watching:
            watchdog.stop()
            session.tracer.uninstall()
            session.context.uninstall()
            engine_hooks.uninstall()
        session.cleanup()  # the scratch folder with the block's redirected saves
