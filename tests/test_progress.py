"""Progress on long runs (issue 32 part 5): on a terminal, a `check` that runs past about a second shows its
phase and the files done on stderr (rich), erased before the report; never with JSON/SARIF output, never when
stderr is not a terminal. The terminal is a real pseudo-terminal (`os.openpty`) on the process's stderr."""

import json
import os
import select
import subprocess
import sys
import tempfile
import time

from tests.conftest import REPO

HAZARD = ("import torch.distributed as dist\n\n\ndef sync():\n    if dist.get_rank() == 0:\n"
          "        dist.barrier()\n")


def _project(root):
    root.mkdir()
    (root / "train.py").write_text(HAZARD)
    for i in range(30):
        (root / f"mod{i}.py").write_text(f"import torch\n\n\ndef f{i}(x):\n    return torch.relu(x) + {i}\n")
    return root


def _run(root, *args, tty: bool, after: str = "0"):
    """dslint check with stderr on a pseudo-terminal (tty) or a pipe; stdout always a pipe."""
    env = {**os.environ, "PYTHONPATH": str(REPO), "DSLINT_PROGRESS_AFTER": after, "TERM": "xterm",
           "DSLINT_CACHE_DIR": str(root.parent / "cache"), "NO_COLOR": "1"}
    env.pop("DSLINT_NO_PROGRESS", None)
    cmd = [sys.executable, "-m", "dslint", "check", "--no-cache", "-j", "1", *args, str(root)]
    if not tty:
        out = subprocess.run(cmd, capture_output=True, env=env, timeout=300)
        return out.returncode, out.stdout.decode(), out.stderr.decode()
    leader, follower = os.openpty()
    # stdout into a file, not a pipe: nobody reads a pipe while stderr is drained below, and a report past the
    # pipe's buffer (64 KiB: a SARIF log with every rule's help) would block the process forever
    out_file = tempfile.TemporaryFile()
    proc = subprocess.Popen(cmd, stdout=out_file, stderr=follower, stdin=subprocess.DEVNULL, env=env)
    os.close(follower)
    err = b""
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        ready, _, _ = select.select([leader], [], [], 0.2)
        if ready:
            try:
                chunk = os.read(leader, 65536)
            except OSError:            # the other side closed (EIO)
                break
            if not chunk:
                break
            err += chunk
        elif proc.poll() is not None:
            break
    proc.wait(timeout=60)
    out_file.seek(0)
    stdout = out_file.read().decode()
    out_file.close()
    os.close(leader)
    return proc.returncode, stdout, err.decode(errors="replace")


def test_progress_on_a_terminal_then_erased(tmp_path):
    root = _project(tmp_path / "proj")
    code, stdout, stderr = _run(root, tty=True)
    assert code == 1, stdout + stderr
    assert "dslint: analysing" in stderr and "/31 files" in stderr, repr(stderr[-2000:])
    assert "dslint: reading files" in stderr or "dslint: launch units of" in stderr
    # the report on stdout is untouched: no escape sequence, the finding and the summary
    assert "\x1b" not in stdout and "train.py:6:9: DSL101" in stdout and "in 31 files." in stdout


def test_no_progress_before_the_threshold(tmp_path):
    root = _project(tmp_path / "proj")
    code, stdout, stderr = _run(root, tty=True, after="600")
    assert code == 1 and "dslint: analysing" not in stderr and "\x1b" not in stderr, repr(stderr)


def test_no_progress_when_stderr_is_not_a_terminal(tmp_path):
    root = _project(tmp_path / "proj")
    code, stdout, stderr = _run(root, tty=False)
    assert code == 1 and stderr == "", stderr
    assert "train.py:6:9: DSL101" in stdout


def test_no_progress_with_json_or_sarif_output(tmp_path):
    root = _project(tmp_path / "proj")
    for fmt in ("json", "sarif"):
        code, stdout, stderr = _run(root, "--format", fmt, tty=True)
        assert code == 1 and "dslint:" not in stderr and "\x1b" not in stderr, (fmt, repr(stderr))
        json.loads(stdout)


def test_display_is_thread_free_and_stays_in_its_process():
    """Nothing but the creating process draws (forked workers inherit the object), and no thread is started
    (the engine forks while the display is up)."""
    import io
    import threading

    from dslint.progress import Progress
    stream = io.StringIO()
    stream.isatty = lambda: True
    before = threading.active_count()
    progress = Progress(stream=stream, start_after=0)
    progress.phase("analysing", total=3)
    progress.advance()
    assert progress.shown and threading.active_count() == before
    assert "analysing" in stream.getvalue()
    pid = os.fork()
    if pid == 0:                                  # the child: drawing is a no-op
        shown = len(stream.getvalue())
        progress.advance()
        os._exit(0 if len(stream.getvalue()) == shown else 1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    progress.close()
