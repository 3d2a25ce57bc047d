"""llama.cpp settings for the bundled local model: prompt and generation speed per setting.

Loads Qwen2.5-Coder-1.5B-Instruct (Q4_K_M) once per setting and times one fixed prompt (about
1,500 tokens of a real controller prompt's shape) and 48 generated tokens, twice, taking the
faster run. Settings: batch sizes (n_batch / n_ubatch), flash attention, KV-cache type.
`--by-context`: with the default setting, the speed of 1,000 more prompt tokens and of 16 generated ones at
each 1,000 tokens of context up to 6,000 (a question's later steps are evaluated behind a long prefix).
`--wait-policies`: the default setting under each OpenMP wait policy (libgomp reads OMP_WAIT_POLICY once, when
llama.cpp loads, so each runs in its own process), alternating, `--rounds` times, with `--busy N` busy-loop
processes beside it (a loaded machine); `saga_dspy.lm.llama.omp_wait_policy` chooses between them. Without that
flag the figures are under the environment's policy (unset: libgomp's default).
`--quantizations`: the bundled Q4_K_M file re-encoded by llama.cpp's own quantizer (`llama_model_quantize`, into a
temporary folder: Q8_0, Q4_0, BF16, F16; no new information, only another weight format and kernels), each timed
with the default setting in its own process, alternating, `--rounds` times.

    python benchmarks/bench_llama_settings.py [--prompt-tokens 1500] [--settings default,batch1024,...]
    python benchmarks/bench_llama_settings.py --by-context
    python benchmarks/bench_llama_settings.py --wait-policies [--busy 1] [--rounds 2]
    python benchmarks/bench_llama_settings.py --quantizations [--rounds 2]

Run it on an idle machine: every figure is wall-clock on this CPU.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

SETTINGS: dict[str, dict] = {
    "default": {},
    "batch256": {"n_batch": 256, "n_ubatch": 256},
    "batch1024": {"n_batch": 1024, "n_ubatch": 1024},
    "flash": {"flash_attn": True},
    "flash-q8kv": {"flash_attn": True, "type_k": 8, "type_v": 8},  # GGML_TYPE_Q8_0 = 8
    "threads1": {"n_threads": 1, "n_threads_batch": 1},
}


def prompt_text(n_tokens: int) -> str:
    """A controller-shaped prompt: instructions, a lookup observation, repeated to the size asked."""
    block = (
        "Your input fields are:\n1. `question` (str)\n2. `trajectory` (str)\nYour output fields are:\n"
        "1. `next_thought` (str)\n2. `next_tool_name` (str)\n3. `next_tool_args` (dict)\n\n"
        "Q76 Barack Obama [types: human (Q5)]\n★ spouse (P26): Michelle Obama (Q13133) range: human\n"
        "date of birth (P569): 1961-08-04  place of birth (P19): Honolulu (Q18094)\n"
        "Other properties: educated at (P69), position held (P39), member of political party (P102)\n"
    )
    return block * max(1, n_tokens // 120)


def measure(model_path: str, extra: dict, prompt: str, runs: int = 2) -> dict:
    import llama_cpp

    kwargs = {
        "model_path": model_path,
        "n_ctx": 4096,
        "n_threads": 2,
        "n_threads_batch": 2,
        "verbose": False,
        "seed": 0,
        **extra,
    }
    started = time.perf_counter()
    llm = llama_cpp.Llama(**kwargs)
    load = time.perf_counter() - started
    tokens = llm.tokenize(prompt.encode("utf-8"))
    best_prompt, best_gen = float("inf"), float("inf")
    for _ in range(runs):
        llm.reset()
        t0 = time.perf_counter()
        llm.eval(tokens)
        t1 = time.perf_counter()
        generated = 0
        for _token in llm.generate([], temp=0.0, reset=False):
            generated += 1
            if generated >= 48:
                break
        t2 = time.perf_counter()
        best_prompt = min(best_prompt, t1 - t0)
        best_gen = min(best_gen, (t2 - t1) / max(1, generated))
    del llm
    return {
        "load_s": round(load, 2),
        "prompt_tokens": len(tokens),
        "prompt_tok_s": round(len(tokens) / best_prompt, 1),
        "gen_tok_s": round(1 / best_gen, 1),
    }


def by_context(model_path: str, prompt: str, chunk: int = 1000, steps: int = 6) -> None:
    import llama_cpp

    llm = llama_cpp.Llama(model_path=model_path, n_ctx=8192, n_threads=2, n_threads_batch=2, verbose=False, seed=0)
    tokens = llm.tokenize(prompt.encode("utf-8"))[: chunk * steps]
    llm.reset()
    print("\n| context tokens | prompt tok/s (next 1,000) | generated tok/s |\n|---|---|---|")
    for start in range(0, len(tokens), chunk):
        t0 = time.perf_counter()
        llm.eval(tokens[start : start + chunk])
        prompt_rate = chunk / (time.perf_counter() - t0)
        t1, generated = time.perf_counter(), 0
        for _ in llm.generate([], temp=0.0, reset=False):
            generated += 1
            if generated >= 16:
                break
        gen_rate = generated / (time.perf_counter() - t1)
        llm.n_tokens = start + chunk  # drop the generated tokens: the next chunk follows the prompt
        print(f"| {start + chunk} | {prompt_rate:.1f} | {gen_rate:.1f} |", flush=True)


WAIT_POLICIES = ("default", "PASSIVE", "ACTIVE")  # default: OMP_WAIT_POLICY unset


def _busy_loop() -> None:
    while True:
        pass


def _alternate(runs: dict[str, tuple[dict[str, str], list[str]]], rounds: int) -> dict[str, list[dict]]:
    """Each run (name: (environment, extra arguments)) times the default setting in a fresh process; the runs
    alternate, `rounds` times, so the machine's drift falls on all of them."""
    rows: dict[str, list[dict]] = {name: [] for name in runs}
    for _ in range(rounds):
        for name, (env, extra) in runs.items():
            out = subprocess.run(
                [sys.executable, __file__, "--settings", "default", "--json-only", *extra],
                env=env,
                capture_output=True,
                text=True,
                check=True,
            ).stdout
            rows[name].append(json.loads(out.strip().splitlines()[-1])["default"])
            print(json.dumps({name: rows[name][-1]}), flush=True)
    return rows


def _speeds(got: list[dict]) -> str:
    """'prompt tok/s | generated tok/s' cells, one figure per round."""
    return " / ".join(str(r["prompt_tok_s"]) for r in got) + " | " + " / ".join(str(r["gen_tok_s"]) for r in got)


def wait_policies(rounds: int, busy: int) -> None:
    """The default setting's speed under each wait policy, each in a fresh process, alternating."""
    hogs = [multiprocessing.Process(target=_busy_loop, daemon=True) for _ in range(busy)]
    for hog in hogs:
        hog.start()
    unset = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    runs = {p: ({**unset, **({} if p == "default" else {"OMP_WAIT_POLICY": p})}, []) for p in WAIT_POLICIES}
    try:
        rows = _alternate(runs, rounds)
    finally:
        for hog in hogs:
            hog.terminate()
    print("\n| OMP_WAIT_POLICY | busy processes | prompt tok/s | generated tok/s |\n|---|---|---|---|")
    for policy, got in rows.items():
        print(f"| {policy} | {busy} | {_speeds(got)} |")


QUANTIZATIONS = {"q8_0": 7, "q4_0": 2, "bf16": 32, "f16": 1}  # llama_ftype values


def quantizations(model: str, rounds: int) -> None:
    """The bundled model and its re-encodings, each timed in a fresh process, alternating."""
    import tempfile

    import llama_cpp

    with tempfile.TemporaryDirectory(prefix="saga-quant-") as tmp:
        files = {"q4_k_m (bundled)": model}
        for name, ftype in QUANTIZATIONS.items():
            params = llama_cpp.llama_model_quantize_default_params()
            params.ftype, params.allow_requantize, params.nthread = ftype, True, 2
            target = str(Path(tmp) / f"{name}.gguf")
            if llama_cpp.llama_model_quantize(model.encode(), target.encode(), params) != 0:
                print(f"{name}: the quantizer failed", flush=True)
                continue
            files[name] = target
        rows = _alternate({name: (dict(os.environ), ["--model", path]) for name, path in files.items()}, rounds)
        sizes = {name: Path(path).stat().st_size / 2**30 for name, path in files.items()}
    print("\n| weights | file GiB | prompt tok/s | generated tok/s |\n|---|---|---|---|")
    for name, got in rows.items():
        print(f"| {name} | {sizes[name]:.2f} | {_speeds(got)} |")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], allow_abbrev=False)
    ap.add_argument("--prompt-tokens", type=int, default=1500)
    ap.add_argument("--settings", default=",".join(SETTINGS))
    ap.add_argument("--by-context", action="store_true", help="prompt and generation speed by context length")
    ap.add_argument("--wait-policies", action="store_true", help="the default setting under each OpenMP wait policy")
    ap.add_argument("--busy", type=int, default=0, help="with --wait-policies: busy-loop processes alongside")
    ap.add_argument("--rounds", type=int, default=2, help="with --wait-policies or --quantizations: alternating rounds")
    ap.add_argument("--quantizations", action="store_true", help="the bundled model re-encoded in other formats")
    ap.add_argument("--json-only", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--model", help=argparse.SUPPRESS)  # a re-encoded file (--quantizations' child processes)
    args = ap.parse_args()
    if args.wait_policies:
        wait_policies(args.rounds, args.busy)
        return 0
    from saga_dspy.config import Settings
    from saga_dspy.lm import ensure_local_model

    model = args.model or str(ensure_local_model(Settings()))
    if args.quantizations:
        quantizations(model, args.rounds)
        return 0
    if not args.json_only:
        print(f"load average before: {os.getloadavg()[0]:.2f}")
    if args.by_context:
        by_context(model, prompt_text(7000))
        return 0
    prompt = prompt_text(args.prompt_tokens)
    rows = {}
    for name in args.settings.split(","):
        rows[name] = measure(model, SETTINGS[name], prompt)
        print(json.dumps({name: rows[name]}), flush=True)
    if args.json_only:
        return 0
    print("\n| setting | prompt tokens | prompt tok/s | generated tok/s | load s |\n|---|---|---|---|---|")
    for name, r in rows.items():
        print(f"| {name} | {r['prompt_tokens']} | {r['prompt_tok_s']} | {r['gen_tok_s']} | {r['load_s']} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
