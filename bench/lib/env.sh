# Sourced by the scripts of bench/: finds CPython 3.11 and makes sure the benchmark
# venv (target/bench-venv) exists with the packages of bench/requirements.txt. Sets BENCH_ROOT (the
# checkout), BENCH_DIR (bench/), BENCH_VENV and BENCH_PY (the venv's python).
BENCH_DIR="$(cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/.." && pwd)"
BENCH_ROOT="$(cd "$BENCH_DIR/.." && pwd)"
BENCH_VENV="${BENCH_VENV:-$BENCH_ROOT/target/bench-venv}"
BENCH_PY="$BENCH_VENV/bin/python"
export BENCH_DIR BENCH_ROOT BENCH_VENV BENCH_PY

bench_find_python311() {
  local candidate
  for candidate in "$HOME"/.pyenv/versions/3.11.*/bin/python3.11 /usr/bin/python3.11 /usr/local/bin/python3.11; do
    if [ -x "$candidate" ]; then echo "$candidate"; return 0; fi
  done
  command -v python3.11 2>/dev/null && return 0
  return 1
}

bench_ensure_venv() {
  local python stamp="$BENCH_VENV/.bench-requirements-installed"
  if [ ! -x "$BENCH_PY" ]; then
    if ! python="$(bench_find_python311)"; then
      echo "bench: no python3.11 found (pyenv or PATH); the benchmark needs CPython 3.11" >&2
      return 1
    fi
    echo "bench: creating $BENCH_VENV with $python" >&2
    "$python" -m venv "$BENCH_VENV" || return 1
  fi
  if [ ! -f "$stamp" ] || [ "$BENCH_DIR/requirements.txt" -nt "$stamp" ]; then
    echo "bench: installing bench/requirements.txt into $BENCH_VENV" >&2
    local out
    if ! out="$("$BENCH_PY" -m pip install -q --retries 0 --disable-pip-version-check \
                 -r "$BENCH_DIR/requirements.txt" 2>&1)"; then
      echo "$out" | grep -v "is ignored: it is neither a file nor a directory" >&2
      echo "bench: pip install -r bench/requirements.txt failed" >&2
      return 1
    fi
    "$BENCH_PY" -c "import fastapi, flask, uvicorn, uvloop, httptools, gunicorn, django, jinja2, asyncpg, psycopg, orjson" || return 1
    touch "$stamp"
  fi
}
