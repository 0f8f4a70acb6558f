"""Running the user's script unchanged in this rank, under the tracer, until its dry step ends."""

from __future__ import annotations

import os
import runpy
import sys
import traceback
from typing import Any

from dslint.runtime_checks import engine_hooks, execution_context
from dslint.runtime_checks.dry_step import DrySession, Options
from dslint.runtime_checks.exit_codes import ExitCode
from dslint.runtime_checks.watchdog import Watchdog

KNOWN_STARTUP_FAILURES = (
    # (exception type name, text in the message, rule code, what it means)
    ("AssertionError", "None of the param groups are marked as MoE", "DSL202",
     "deepspeed.initialize rejected the client optimizer: the model has MoE layers but no optimizer param group "
     "is marked {'moe': True}, so expert parameters would be reduced over the wrong group"),
)


def classify(exc: BaseException) -> dict[str, Any] | None:
    for type_name, text, code, meaning in KNOWN_STARTUP_FAILURES:
        if type(exc).__name__ == type_name and text in str(exc):
            return {"code": code, "message": meaning}
    return None


def _error_record(exc: BaseException) -> dict[str, Any]:
    frames = traceback.extract_tb(exc.__traceback__)
    user = [f for f in frames if not execution_context.is_library_file(f.filename)]
    last = (user or frames or [None])[-1]
    return {
        "exception": type(exc).__name__, "message": str(exc)[:2000],
        "source": [last.filename, last.lineno, last.name] if last else None,
        "traceback": "".join(traceback.format_exception(exc))[-6000:],
    }


def monitor_wait() -> float:
    from dslint.runtime_checks.monitor import DEAD_AFTER_S

    return DEAD_AFTER_S + 1.0


def run(options: Options, script: str, script_args: list[str], local_rank: int | None) -> int:
    if not os.path.isfile(script):
        print(f"dslint preflight: no such script: {script}", file=sys.stderr)
        return int(ExitCode.USAGE)
    script = os.path.abspath(script)
    if local_rank is not None:
        os.environ.setdefault("LOCAL_RANK", str(local_rank))
    with open(script, encoding="utf-8", errors="replace") as f:
        script_text = f.read()

    session = DrySession(options)
    from dslint.runtime_checks import static_link

    session.static_check = static_link.start(script, int(os.environ.get("RANK", "0")))
    session.context.install()
    session.tracer.install()
    engine_hooks.install(session, script_text)
    watchdog = Watchdog(session)
    watchdog.signal_fd = _watch_signals()
    _hook_os_exit(session)
    watchdog.start()

    # hand --local_rank on where the deepspeed launcher puts it for a plain script
    sys.argv = [script] + ([f"--local_rank={local_rank}"] if local_rank is not None else []) + list(script_args)
    sys.path.insert(0, os.path.dirname(script))
    execution_context.set_user_roots(os.path.dirname(os.path.abspath(script)), os.getcwd())
    failure: BaseException | None = None
    exit_code = 0
    try:
        # the script's own `for ... in range(...)` loops can end with the dry steps (engine_hooks.ScriptRange)
        runpy.run_path(script, run_name="__main__", init_globals={"range": engine_hooks.ScriptRange})
    except SystemExit as exc:
        if exc.code not in (0, None):
            failure = exc
            exit_code = exc.code if isinstance(exc.code, int) else 1
    except BaseException as exc:  # noqa: BLE001 - the script's failure is a verdict, not our crash
        failure = exc
    if session.status == "aborting":
        # another thread (the watchdog) is concluding and will exit the process with the verdict's code:
        # wait for it rather than print the script's traceback or return 0 under it (conclude blocks here)
        session.conclude({"kind": "error"})
    if failure is not None and session.status in ("running", "done"):
        fail(session, failure)
    if session.status == "running":
        session.finish("script exit")
    watchdog.stop()
    session.tracer.uninstall()
    session.context.uninstall()
    engine_hooks.uninstall()
    session.cleanup()  # --continue or a failure after the pass: the scratch folder goes here too
    if failure is not None:  # failed after a passed dry step (--continue): the script's own status
        traceback.print_exception(failure)
        return exit_code or int(ExitCode.SCRIPT_ERROR)
    return 0


TRANSPORT_ERRORS = ("Connection closed by peer", "Connection reset by peer", "Broken pipe", "Connection refused",
                    "remote process exited", "NCCL communicator was aborted", "ECONNRESET", "Connection reset",
                    "Failed to recv", "failed to recv", "recvValue", "recvBytes", "sendBytes", "Socket")


def _watch_signals() -> int | None:
    """SIGTERM/SIGHUP wake the watchdog through a pipe (``signal.set_wakeup_fd``), also while the main thread
    is blocked in C++ and cannot run a Python handler; the handler itself does nothing (the watchdog concludes
    and exits the process). The script's own handlers, installed later, replace ours but not the pipe."""
    import signal

    try:
        read_fd, write_fd = os.pipe()
        os.set_blocking(read_fd, False)
        os.set_blocking(write_fd, False)
        signal.set_wakeup_fd(write_fd, warn_on_full_buffer=False)
        for signum in (signal.SIGTERM, signal.SIGHUP):
            if signal.getsignal(signum) in (signal.SIG_DFL, None):
                signal.signal(signum, lambda *_: None)
        return read_fd
    except (ValueError, OSError):  # not the main thread, or no pipes: the timeout stays the bound
        return None


def _hook_os_exit(session: DrySession) -> None:
    """An exit hook for ``os._exit`` in the script (it skips atexit and finally): the monitor then names
    the rank and its code instead of seeing its heartbeat stop."""
    real_exit = os._exit

    def hooked(code: int) -> None:
        if not session.exiting and session.status in ("running", "done"):
            try:
                peers = session.peers()
                if peers is not None:
                    peers.put(f"exit/{session.rank}", {"how": "os._exit", "code": code})
                    peers.add("exits", 1)
            except Exception:
                pass
        real_exit(code)

    os._exit = hooked  # type: ignore[assignment]


def _store_lost(session: DrySession, exc: BaseException) -> dict[str, Any] | None:
    """The collective failed in the transport and the store cannot be reached: under env:// rendezvous
    without torchrun's agent store, the store lived in rank 0, so rank 0 is gone."""
    if os.environ.get("TORCHELASTIC_USE_AGENT_STORE") == "True" or session.rank == 0:
        return None
    from dslint.runtime_checks import monitor

    record = session.tracer.records[-1] if session.tracer.records else {}
    beat = (getattr(session, "peer_beats", None) or {}).get(0) or {}
    how = "gone: the rendezvous store it hosted is unreachable"
    if beat.get("pid") and beat.get("host") == monitor.Heart(session).host:
        alive, ended = monitor.process_status(int(beat["pid"]))
        if not alive:
            how = ended or monitor.NO_HOOK
    return {"kind": "hang", "cause": "dead-rank", "dead_ranks": [0], "stuck_ranks": [session.rank],
            "dead": {"0": {"how": how, "pos": beat.get("pos"), "last": beat.get("last"), "host": beat.get("host"),
                           "pid": beat.get("pid"), "scratch": beat.get("scratch")}},
            "detail": (f"rank 0 died or left (the rendezvous store it hosted is unreachable); rank {session.rank}'s "
                       f"{record.get('op')} #{record.get('seq')} in group {record.get('group')} failed: "
                       f"{str(exc)[:200]}"),
            "detected_by": session.rank}


def fail(session: DrySession, exc: BaseException) -> None:
    if any(text in str(exc) for text in TRANSPORT_ERRORS):  # a peer went away under this collective
        try:
            verdict = session.find_dead(monitor_wait())
        except Exception:  # the store is unreachable too: it lived in the rank that died
            verdict = _store_lost(session, exc)
        if verdict is not None:
            peers = session.peers()
            try:
                verdict = peers.abort(verdict) if peers is not None else verdict
            except Exception:
                pass
            session.conclude(verdict)
    error = _error_record(exc)
    finding = classify(exc)
    session.error = error
    verdict = {"kind": "error", "rank": session.rank, "exception": f"{error['exception']}: {error['message'][:300]}",
               "detail": f"rank {session.rank}: the script raised {error['exception']}: {error['message'][:300]}",
               "finding": finding, "detected_by": session.rank}
    if not finding:
        print(error["traceback"], file=sys.stderr, flush=True)
    peers = session.peers()
    if peers is not None:
        peers.put(f"fin/{session.rank}", session.summary("error"))
        verdict = peers.abort(verdict)
    session.conclude(verdict)
