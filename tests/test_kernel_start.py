"""nbval's kernels, started through tools/kernel_start.py (installed by the root conftest.py).

The port race is made to happen, not waited for: just before the kernel process is launched (its
ports chosen and written into its connection file), the test binds the kernel's shell port
itself, as another process could. The reference is the kernel: ipykernel's own error on standard
error, and a kernel that answers or does not.
"""

from __future__ import annotations

import json
import socket
import sys
import warnings

import pytest

nbval_kernel = pytest.importorskip("nbval.kernel")
from jupyter_client.provisioning import local_provisioner  # noqa: E402

from tools import kernel_start  # noqa: E402


@pytest.fixture
def launches(monkeypatch):
    """Count kernel launches; ``launches.take`` lists the launches (1-based) whose shell port
    another socket takes first."""
    original = local_provisioner.LocalProvisioner.launch_kernel
    record = {"count": 0, "take": set(), "held": []}

    async def launch_kernel(self, cmd, **kwargs):
        record["count"] += 1
        if record["count"] in record["take"]:
            manager = self.parent
            sock = socket.socket()
            sock.bind((manager.ip, manager.shell_port))
            sock.listen()
            record["held"].append(sock)
        return await original(self, cmd, **kwargs)

    monkeypatch.setattr(local_provisioner.LocalProvisioner, "launch_kernel", launch_kernel)
    yield record
    for sock in record["held"]:
        sock.close()


def _run(kernel, code):
    """Execute ``code`` in an nbval RunningKernel; return the text of its stdout."""
    msg_id = kernel.execute_cell_input(code, allow_stdin=False)
    kernel.await_reply(msg_id, timeout=30)
    text = []
    while True:
        msg = kernel.get_message(stream="iopub", timeout=30)
        if msg["parent_header"].get("msg_id") != msg_id:
            continue
        if msg["msg_type"] == "stream":
            text.append(msg["content"]["text"])
        if msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
            return "".join(text)


def test_conftest_installed_the_retrying_start():
    assert getattr(nbval_kernel.start_new_kernel, "_course_retrying", False)


def test_a_kernel_whose_port_is_taken_is_started_again_and_answers(launches):
    launches["take"] = {1}
    with pytest.warns(kernel_start.KernelPortTaken, match="Address already in use") as caught:
        kernel = nbval_kernel.RunningKernel(nbval_kernel.CURRENT_ENV_KERNEL_NAME)
    try:
        assert launches["count"] == 2
        assert len([w for w in caught if w.category is kernel_start.KernelPortTaken]) == 1
        assert "start 2 of 3" in str(caught[0].message)
        assert kernel.is_alive()
        assert _run(kernel, "print(6 * 7)") == "42\n"
    finally:
        kernel.stop()


def test_a_kernel_that_keeps_losing_its_ports_fails_with_ipykernels_error(launches, monkeypatch):
    monkeypatch.setattr(kernel_start, "ATTEMPTS", 2)  # the same path as 3, one kernel start less
    launches["take"] = {1, 2}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", kernel_start.KernelPortTaken)
        with pytest.raises(RuntimeError) as raised:
            nbval_kernel.RunningKernel(nbval_kernel.CURRENT_ENV_KERNEL_NAME)
    assert launches["count"] == 2
    message = str(raised.value)
    assert "Kernel died before replying to kernel_info (start 2 of 2)" in message
    assert "zmq.error.ZMQError: Address already in use" in message


def test_a_kernel_that_dies_for_another_reason_fails_at_once_with_its_stderr(
    launches, tmp_path, monkeypatch
):
    spec = tmp_path / "kernels" / "course-dying"
    spec.mkdir(parents=True)
    dying = "import sys; sys.stderr.write('ModuleNotFoundError: course_missing\\n'); sys.exit(3)"
    argv = [sys.executable, "-c", dying, "{connection_file}"]
    spec.joinpath("kernel.json").write_text(
        json.dumps({"argv": argv, "display_name": "dies at start", "language": "python"})
    )
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path))
    with warnings.catch_warnings():
        warnings.simplefilter("error", kernel_start.KernelPortTaken)
        with pytest.raises(RuntimeError) as raised:
            nbval_kernel.RunningKernel("course-dying")
    assert launches["count"] == 1
    message = str(raised.value)
    assert "Kernel died before replying to kernel_info (start 1 of 3)" in message
    assert message.endswith("ModuleNotFoundError: course_missing")


def test_attempts_must_be_positive():
    with pytest.raises(ValueError, match="at least 1"):
        kernel_start.start_retrying(lambda **kw: None, attempts=0)
