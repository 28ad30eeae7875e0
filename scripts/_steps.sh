# Shared by the scripts: `step NAME COMMAND...` prints "== NAME", runs the command and prints
# how long it took, so a slow set-up shows where its time goes.
step() {
    local name="$1" started elapsed
    shift
    echo "== $name"
    started=${EPOCHREALTIME/./}
    local status=0
    # The command's status is returned, not left to `set -e`: a caller that runs `step ... || ...`
    # turns errexit off inside the function, where a failure would otherwise be forgotten.
    "$@" || status=$?
    elapsed=$(( (${EPOCHREALTIME/./} - started) / 100000 ))
    echo "   $name: $((elapsed / 10)).$((elapsed % 10)) s"
    return "$status"
}

# The uv release the lock was written with (uv.lock's format and `uv sync --frozen` agree).
UV_VERSION="0.13.9"
export UV_PYTHON_DOWNLOADS=never   # use the machine's Python, never fetch one

# Print the path of a uv of UV_VERSION: one on PATH, else one installed from the package index
# into .tools/uv (pip --target). Prints nothing when neither works: the caller falls back to pip.
find_uv() {
    if command -v uv >/dev/null && [ "$(uv --version 2>/dev/null | cut -d' ' -f2)" = "$UV_VERSION" ]; then
        command -v uv
        return
    fi
    if [ ! -x .tools/uv/bin/uv ] || [ "$(.tools/uv/bin/uv --version 2>/dev/null | cut -d' ' -f2)" != "$UV_VERSION" ]; then
        rm -rf .tools/uv
        # uv has no dependencies and is run as a binary: --no-deps --no-compile spare pip a
        # resolution and a bytecode pass, about 1 s of a fresh machine's first command.
        "$PYTHON" -m pip install --quiet --disable-pip-version-check --root-user-action=ignore \
            --no-deps --no-compile --target .tools/uv "uv==$UV_VERSION" >&2 \
            || return 0
    fi
    if .tools/uv/bin/uv --version >/dev/null 2>&1; then
        echo "$PWD/.tools/uv/bin/uv"
    fi
}
