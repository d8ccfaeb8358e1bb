"""Time static analysis of lowered kernels, separately from TileLang's own build/lowering.

Run: .venv/bin/python benchmarks/bench_lint.py
Prints, per sample kernel: TileLang lower time, and tilescope's static analysis time (IR walk +
ir.json assembly + line map + rules) which must stay <= 1 s. Ratios are against the lowering time
measured in the same process (no absolute wall-clock assertion anywhere in the tests).
"""

from __future__ import annotations

import time
from pathlib import Path

import pandas as pd

from tilescope.chips import get_chip
from tilescope.engine import run_rules
from tilescope.ir.capture import capture_ir
from tilescope.profile import Profile, SourceInfo

KERNELS = Path(__file__).resolve().parents[1] / "sample_traces" / "kernels"
CASES = [
    ("matmul.py:matmul", {}),
    ("matmul.py:matmul", {"accum_dtype": "float16", "block_M": 250, "block_N": 280, "block_K": 40}),
    ("flash_attention.py", {}),
    ("attention_unfused.py", {}),
    ("rmsnorm.py", {}),
]


def main() -> None:
    chip = get_chip("910B2")
    print(f"{'kernel':<24} {'params':<40} {'lower s':>8} {'analyse s':>10} {'rules s':>8} "
          f"{'static s':>9} ratio")
    for ref, params in CASES:
        cap = capture_ir(str(KERNELS / ref), params, chip)
        t0 = time.perf_counter()
        prof = Profile(source=SourceInfo(path=cap.kernel_file, format="ir"), kernels=pd.DataFrame(),
                       chip=chip, ir=cap.ir)
        res = run_rules(prof, kinds=("static",))
        rules_s = time.perf_counter() - t0
        static_s = cap.timings["analyse_s"] + rules_s
        lower_s = cap.timings["lower_s"]
        analyse_s = cap.timings["analyse_s"]
        codes = sorted({f.code for f in res.findings})
        print(f"{ref:<24} {str(params)[:40]:<40} {lower_s:8.3f} {analyse_s:10.4f} {rules_s:8.4f} "
              f"{static_s:9.4f} {static_s / lower_s:5.3f}  findings={codes}")


if __name__ == "__main__":
    main()
