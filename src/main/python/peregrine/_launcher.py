"""The `peregrine` command of the pip package (and `python -m peregrine`).

It runs the server on the Java runtime the wheel carries, with the JVM options bin/peregrine uses (one
file, `java @FILE`), and tells the server to embed the interpreter running this code, so that the
application sees the packages installed beside Peregrine, as with uvicorn. The command replaces this
process with the JVM (exec): signals such as SIGTERM and SIGHUP reach the server itself, and the
supervisor starts its workers by running its own command line again.

Only os, signal and sys are imported (shlex when PEREGRINE_JAVA_OPTS is set): this runs before every
start.
"""

import os
import signal
import sys

RUNTIME = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_runtime")
JAVA = os.path.join(RUNTIME, "java", "bin", "java")
JAR = os.path.join(RUNTIME, "server", "quarkus-run.jar")
OPTIONS = os.path.join(RUNTIME, "jvm-options")
# Written by the training run of bin/build-wheel; a wheel built with --no-aot has none.
AOT_CACHE = os.path.join(RUNTIME, "server.aot")
# Read by dev.peregrine.python.PythonInstall.
PYTHON_ENV = "PEREGRINE_PYTHON"


def command(arguments, environment):
    """The JVM's command line for the server's `arguments`."""
    jvm = [JAVA, "@" + OPTIONS,
           "-XX:ErrorFile=%s/peregrine-crash-%%p.log" % (environment.get("TMPDIR") or "/tmp")]
    if os.path.isfile(AOT_CACHE):
        jvm.append("-XX:AOTCache=" + AOT_CACHE)
    if environment.get("PEREGRINE_JAVA_OPTS"):
        import shlex

        jvm += shlex.split(environment["PEREGRINE_JAVA_OPTS"])
    return jvm + ["-jar", JAR, *arguments]


def main():
    if not (os.access(JAVA, os.X_OK) and os.path.isfile(JAR) and os.path.isfile(OPTIONS)):
        sys.exit("peregrine: this installation lacks its Java runtime or server (%s): reinstall peregrine-server" % RUNTIME)
    if not sys.executable:
        sys.exit("peregrine: Python cannot tell its own executable (sys.executable is empty): run the server with --venv")
    os.environ[PYTHON_ENV] = sys.executable
    argv = command(sys.argv[1:], os.environ)
    # Under nohup (or an init system, or a shell's background job) a signal may arrive here ignored, and
    # the JVM would then never handle it: SIGHUP would not replace the workers. The server resets these
    # itself too; doing it here as well covers the moments before its own code runs.
    for number in (signal.SIGHUP, signal.SIGINT, signal.SIGTERM):
        if signal.getsignal(number) == signal.SIG_IGN:
            signal.signal(number, signal.SIG_DFL)
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(argv[0], argv)
