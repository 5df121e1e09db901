#!/usr/bin/env bash
# One entry point for a fresh machine with Python >= 3.10:
#   bash scripts/bootstrap.sh app  [streamlit args]  -> venv + requirements, then the dashboard on 127.0.0.1
#   bash scripts/bootstrap.sh test [pytest args]     -> venv + requirements + dev requirements
#                                                       (+ Debian's chromium when root and missing), then pytest
# The venv is .venv (override with PRIVENGINE_VENV); installs are skipped when every wanted
# requirement file has been installed, as it is now, by an earlier successful install (of any
# mode: `app` after `test` installs nothing, test's files being a superset of app's).
set -euo pipefail
cd "$(dirname "$0")/.."

mode=${1:-}
shift || true
python=${PYTHON:-python3}
venv=${PRIVENGINE_VENV:-.venv}

"$python" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 10) else "privengine needs Python >= 3.10; got " + sys.version.split()[0])'

if [[ ! -x "$venv/bin/python" ]]; then
    echo "creating virtual environment $venv" >&2
    "$python" -m venv "$venv"
fi

stamp() {  # the file recording that requirement file $1, with its content now, was installed
    echo "$venv/.installed-$(basename "$1")-$(sha256sum < "$1" | cut -c1-16)"
}

install() {  # install the given requirement files unless each is already installed as it is now
    local f missing=0
    for f in "$@"; do [[ -f "$(stamp "$f")" ]] || missing=1; done
    if (( missing )); then
        echo "installing $* into $venv (first time: a few minutes)" >&2
        "$venv/bin/python" -m pip install --quiet --upgrade pip
        local args=()
        for f in "$@"; do args+=(-r "$f"); done
        "$venv/bin/python" -m pip install --quiet "${args[@]}"
        for f in "$@"; do touch "$(stamp "$f")"; done
    fi
}

case "$mode" in
    app)
        install requirements.txt
        exec "$venv/bin/python" -m streamlit run app.py --server.address 127.0.0.1 "$@"
        ;;
    test)
        install requirements.txt requirements-dev.txt
        if [[ $(id -u) == 0 ]] && ! command -v chromium >/dev/null && command -v apt-get >/dev/null; then
            echo "installing Debian's chromium for the browser tests" >&2
            apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
        fi
        # Bytecode caches on, whatever the environment says (this machine's sets PYTHONDONTWRITEBYTECODE=1): without
        # them every process the suite starts (each xdist worker, served app, CLI run and Ray worker) compiles the
        # project's modules anew, and pytest rewrites every test module's asserts anew (collection: 14.3 s of CPU
        # per worker, 8.0 s with the caches). They land in __pycache__/ folders, which git ignores.
        unset PYTHONDONTWRITEBYTECODE
        exec "$venv/bin/python" -m pytest "$@"
        ;;
    *)
        echo "usage: bash scripts/bootstrap.sh app|test [args...]" >&2
        exit 2
        ;;
esac
