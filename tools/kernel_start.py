"""Start nbval's notebook kernels again when one loses the race for its ports.

jupyter_client chooses a kernel's five TCP ports by binding port 0 and letting each socket go;
the kernel binds them itself once its process has started, a second or so later. If any other
process takes one of those ports in between (another kernel, or the local end of an outgoing
connection: the ephemeral range serves both), the kernel exits at once with ``ZMQError: Address
already in use`` and nbval reports "Kernel died before replying to kernel_info" for every cell
of the notebook. nbval sends the kernel's standard error to ``os.devnull``, so nothing said why.
With two pytest workers, a second nbval run and a JupyterLab side by side (``.ci/run``), it
happens now and then.

:func:`install` wraps nbval's kernel start (the repository's ``conftest.py`` calls it):

* the kernel's standard error goes to a temporary file instead of ``os.devnull``;
* a kernel that dies with "Address already in use" is started again, on new ports, up to
  :data:`ATTEMPTS` times in all, each restart said by a :class:`KernelPortTaken` warning (pytest
  lists it in its warnings summary);
* a kernel that fails to start for any other reason fails at once, as before, and the error now
  ends with the last lines of the kernel's standard error.
"""

from __future__ import annotations

import functools
import tempfile
import warnings

#: starts in all, the first included, before a kernel that keeps losing its ports fails
ATTEMPTS = 3
#: what ipykernel's standard error says when a port it was given is taken (zmq's EADDRINUSE)
PORT_TAKEN = "Address already in use"
#: lines of the kernel's standard error that a failed start quotes
STDERR_LINES = 15


class KernelPortTaken(UserWarning):
    """A notebook kernel lost one of its ports to another process and was started again."""


def start_retrying(start, *args, attempts: int | None = None, **kwargs):
    """Call ``start(*args, stderr=<file>, **kwargs)`` (nbval's ``start_new_kernel``) and return
    what it returns, starting again when the kernel died because a port was taken, up to
    ``attempts`` starts in all (default :data:`ATTEMPTS`); any other failure is raised at once,
    with the end of the kernel's standard error appended."""
    attempts = ATTEMPTS if attempts is None else attempts
    if attempts < 1:
        raise ValueError(f"attempts must be at least 1, not {attempts}")
    given = kwargs.pop("stderr", None)  # nbval opens os.devnull for it; nothing else uses it
    if given is not None and hasattr(given, "close"):
        given.close()
    attempt = 1
    while True:  # each start returns, raises, or (a port taken, starts left) starts again
        # the kernel holds its own copy of the file; this one is only read after a failure
        with tempfile.TemporaryFile() as stderr:
            try:
                return start(*args, stderr=stderr, **kwargs)
            except RuntimeError as error:
                stderr.seek(0)
                said = stderr.read().decode("utf-8", errors="replace")
                if PORT_TAKEN in said and attempt < attempts:
                    warnings.warn(
                        f"a notebook kernel died at start, a port it was given already taken "
                        f"({_last_line_with(said, PORT_TAKEN)}); starting it again on new "
                        f"ports (start {attempt + 1} of {attempts})",
                        KernelPortTaken,
                        stacklevel=2,
                    )
                    attempt += 1
                    continue
                tail = "\n".join(said.rstrip().splitlines()[-STDERR_LINES:]) or "(nothing)"
                raise RuntimeError(
                    f"{error} (start {attempt} of {attempts}); the kernel's standard error "
                    f"ended:\n{tail}"
                ) from error


def _last_line_with(text: str, needle: str) -> str:
    return next(line.strip() for line in reversed(text.splitlines()) if needle in line)


def install() -> bool:
    """Make nbval start its kernels through :func:`start_retrying`; return False where nbval
    is not installed. Calling it again changes nothing."""
    try:
        import nbval.kernel
    except ImportError:
        return False
    start = nbval.kernel.start_new_kernel
    if getattr(start, "_course_retrying", False):
        return True

    @functools.wraps(start)
    def retrying(*args, **kwargs):
        return start_retrying(start, *args, **kwargs)

    retrying._course_retrying = True
    nbval.kernel.start_new_kernel = retrying
    return True
