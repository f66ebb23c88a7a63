"""What bin/peregrine says when the machine cannot run the application: no JDK 25, or a Python that
cannot be embedded. Each is one clear line and a non-zero exit."""
import os
import stat
import subprocess
import sys

import pytest

from conftest import APPS_DIR, REPO_ROOT

pytestmark = pytest.mark.peregrine_only

LAUNCHER = str(REPO_ROOT / "bin" / "peregrine")


def run(args, env=None, timeout=120):
    return subprocess.run([LAUNCHER, *args], cwd=APPS_DIR, env=env, capture_output=True, text=True, timeout=timeout)


def test_no_jdk_25_is_one_clear_line(tmp_path):
    env = dict(os.environ, JAVA_HOME=str(tmp_path), PEREGRINE_JVM_DIR=str(tmp_path))
    result = run(["raw_asgi:app"], env=env)
    assert result.returncode != 0
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("peregrine: no JDK 25 found")


def fake_interpreter(root, shared):
    """A 'virtualenv' whose python3 describes itself as Python 3.11 with or without a shared libpython."""
    bin_dir = root / "bin"
    bin_dir.mkdir(parents=True)
    python = bin_dir / "python3"
    # The lines of PythonInstall.PROBE: executable, version, prefix, Py_ENABLE_SHARED, LIBDIR, LDLIBRARY,
    # INSTSONAME, base_prefix, abiflags, Py_GIL_DISABLED.
    answer = "\n".join([str(python), "3.11.7", str(root), "1" if shared else "0", str(root / "lib"), "libpython3.11.a",
                        "libpython3.11.a", str(root), "", "0"])
    python.write_text("#!/bin/sh\nprintf '%s\\n' " + " ".join("'%s'" % line for line in answer.splitlines()) + "\n")
    python.chmod(python.stat().st_mode | stat.S_IEXEC)
    return python


def test_python_without_shared_libpython_is_refused_in_one_line(tmp_path):
    fake_interpreter(tmp_path / "static", shared=False)
    result = run(["--venv", str(tmp_path / "static"), "raw_asgi:app"])
    assert result.returncode != 0
    assert "without a shared libpython" in result.stderr
    assert len([line for line in result.stderr.splitlines() if line.startswith("peregrine:")]) == 1
    assert "Traceback" not in result.stderr and "Exception" not in result.stderr


def test_venv_that_is_not_a_virtualenv_is_named(tmp_path):
    result = run(["--venv", str(tmp_path / "nothing-here"), "raw_asgi:app"])
    assert result.returncode != 0
    assert "is not a virtualenv" in result.stderr and "nothing-here" in result.stderr


def test_python_older_than_3_10_is_refused(tmp_path):
    root = tmp_path / "old"
    python = fake_interpreter(root, shared=True)
    python.write_text(python.read_text().replace("'3.11.7'", "'3.9.18'"))
    result = run(["--venv", str(root), "raw_asgi:app"])
    assert result.returncode != 0
    assert "needs CPython 3.10 or newer" in result.stderr
