"""The workload: kernels of a LLaMA-style transformer layer, the 2-step plan and its schedule."""

from __future__ import annotations

import random
from dataclasses import dataclass, replace
from typing import Any

from .model import (
    AIC_CORES,
    AIV_CORES,
    BATCH,
    COMPUTE_STREAM,
    DIP_FREQ_MHZ,
    FFN,
    FREQ_MHZ,
    HCCL_STREAM,
    HEAD_DIM,
    HEADS,
    HIDDEN,
    N_LAYERS,
    N_STEPS,
    SEED,
    SEQ,
    T0_NS,
    TOKENS,
    KernelSpec,
    Launch,
    model_kernel,
    numel,
    tensor_bytes,
)


def vector_kernel(
    api: str,
    op_type: str,
    torch_op: str,
    ins: list[tuple[str, str]],
    outs: list[tuple[str, str]],
    passes: float = 1.0,
    block_dim: int = AIV_CORES,
    impl: str | None = None,
) -> KernelSpec:
    """An AI_VECTOR_CORE kernel; ``passes`` = how many times each byte goes through the vector unit."""
    in_s, in_d = ";".join(s for s, _ in ins), ";".join(d for _, d in ins)
    out_s, out_d = ";".join(s for s, _ in outs), ";".join(d for _, d in outs)
    rd, wr = tensor_bytes(in_s, in_d), tensor_bytes(out_s, out_d)
    impl = impl or f"{op_type}AiCore"
    return KernelSpec(
        name=f"{api}_{impl}_{op_type}",
        op_type=op_type,
        core="AI_VECTOR_CORE",
        block_dim=block_dim,
        mix_block_dim=0,
        torch_op=torch_op,
        acl_api=api,
        in_shapes=in_s,
        in_dtypes=in_d,
        in_formats=";".join("ND" for _ in ins),
        out_shapes=out_s,
        out_dtypes=out_d,
        out_formats=";".join("ND" for _ in outs),
        read_bytes=rd,
        write_bytes=wr,
        vector_bytes=max(rd, wr) * passes,
    )


def matmul_kernel(
    m: int, k: int, n: int, batch: tuple[int, ...] = (), block_dim: int = AIC_CORES
) -> KernelSpec:
    """A fp16 (Batch)MatMul on the cube cores: FLOPs and HBM traffic follow from the shapes."""
    nb = 1
    for b in batch:
        nb *= b
    pre = ",".join(str(b) for b in batch) + "," if batch else ""
    if batch:
        api, op_type, impl, torch_op = "aclnnBatchMatMul", "BatchMatMulV3", "BatchMatMulV3Common", "aten::bmm"
    else:
        api, op_type, impl, torch_op = "aclnnMatmul", "MatMulV3", "MatMulV3Common", "aten::matmul"
    return KernelSpec(
        name=f"{api}_{impl}_{op_type}",
        op_type=op_type,
        core="AI_CORE",
        block_dim=block_dim,
        mix_block_dim=0,
        torch_op=torch_op,
        acl_api=api,
        in_shapes=f"{pre}{m},{k};{pre}{k},{n}",
        in_dtypes="DT_FLOAT16;DT_FLOAT16",
        in_formats="ND;ND",
        out_shapes=f"{pre}{m},{n}",
        out_dtypes="DT_FLOAT16",
        out_formats="ND",
        flops=2.0 * nb * m * k * n,
        read_bytes=2.0 * nb * (m * k + k * n),
        write_bytes=2.0 * nb * m * n,
    )


HS = f"{BATCH},{SEQ},{HIDDEN}"  # hidden states
ROW = f"{BATCH},{SEQ},1"
SCORES = f"{BATCH},{HEADS},{SEQ},{SEQ}"
F16, F32 = "DT_FLOAT16", "FLOAT"


def rmsnorm_unfused() -> list[KernelSpec]:
    """LLaMA-style RMSNorm written in eager PyTorch: seven vector kernels and three HBM round trips."""
    return [
        vector_kernel("aclnnCast", "Cast", "aten::_to_copy", [(HS, F16)], [(HS, F32)]),
        vector_kernel("aclnnPowTensorScalar", "Square", "aten::pow", [(HS, F32)], [(HS, F32)]),
        vector_kernel("aclnnMean", "ReduceMean", "aten::mean", [(HS, F32)], [(ROW, F32)], passes=2),
        vector_kernel("aclnnAdds", "Add", "aten::add", [(ROW, F32)], [(ROW, F32)]),
        vector_kernel("aclnnRsqrt", "Rsqrt", "aten::rsqrt", [(ROW, F32)], [(ROW, F32)], passes=4),
        vector_kernel("aclnnMul", "Mul", "aten::mul", [(HS, F32), (ROW, F32)], [(HS, F32)]),
        vector_kernel("aclnnMul", "Mul", "aten::mul", [(HS, F32), (str(HIDDEN), F16)], [(HS, F16)]),
    ]


def rmsnorm_fused() -> list[KernelSpec]:
    return [
        vector_kernel(
            "aclnnRmsNorm",
            "RmsNorm",
            "npu::npu_rms_norm",
            [(HS, F16), (str(HIDDEN), F16)],
            [(HS, F16), (ROW, F32)],
            passes=4,
            impl="RmsNorm",
        ),
    ]


def rope_unfused() -> list[KernelSpec]:
    """Rotary embedding on q and k stacked (32 heads), with rotate_half as Slice/Neg/ConcatD."""
    qk, half = f"{BATCH},{SEQ},{2 * HEADS},{HEAD_DIM}", f"{BATCH},{SEQ},{2 * HEADS},{HEAD_DIM // 2}"
    cs = f"1,{SEQ},1,{HEAD_DIM}"
    return [
        vector_kernel("aclnnMul", "Mul", "aten::mul", [(qk, F16), (cs, F16)], [(qk, F16)]),
        vector_kernel("aclnnSlice", "Slice", "aten::slice", [(qk, F16)], [(half, F16)]),
        # 40 of 48 vector cores: a launch configuration that leaves cores idle on purpose
        vector_kernel("aclnnNeg", "Neg", "aten::neg", [(half, F16)], [(half, F16)], block_dim=40),
        vector_kernel(
            "aclnnCat", "ConcatD", "aten::cat", [(half, F16), (half, F16)], [(qk, F16)], block_dim=40
        ),
        vector_kernel("aclnnMul", "Mul", "aten::mul", [(qk, F16), (cs, F16)], [(qk, F16)]),
        vector_kernel("aclnnAdd", "Add", "aten::add", [(qk, F16), (qk, F16)], [(qk, F16)]),
    ]


def attention_unfused() -> list[KernelSpec]:
    """Eager attention: the [8,16,2048,2048] scores make five HBM round trips."""
    q = f"{BATCH},{HEADS},{SEQ},{HEAD_DIM}"
    mask_bits = str(BATCH * HEADS * SEQ * SEQ // 8)
    dropout = vector_kernel(
        "aclnnDropoutDoMask",
        "DropOutDoMask",
        "aten::native_dropout",
        [(SCORES, F16), (mask_bits, "UINT8"), ("", F16)],
        [(SCORES, F16)],
        passes=2,
    )
    return [
        matmul_kernel(SEQ, HEAD_DIM, SEQ, batch=(BATCH, HEADS)),
        vector_kernel("aclnnMuls", "Mul", "aten::mul", [(SCORES, F16)], [(SCORES, F16)]),
        vector_kernel(
            "aclnnAdd", "Add", "aten::add", [(SCORES, F16), (f"1,1,{SEQ},{SEQ}", F16)], [(SCORES, F16)]
        ),
        vector_kernel(
            "aclnnSoftmax", "SoftmaxV2", "aten::_softmax", [(SCORES, F16)], [(SCORES, F32)], passes=3
        ),
        vector_kernel("aclnnCast", "Cast", "aten::_to_copy", [(SCORES, F32)], [(SCORES, F16)]),
        replace(dropout, in_shapes=f"{SCORES};{mask_bits};"),
        replace(matmul_kernel(SEQ, SEQ, HEAD_DIM, batch=(BATCH, HEADS)), in_shapes=f"{SCORES};{q}"),
    ]


def attention_fused() -> list[KernelSpec]:
    """One FlashAttentionScore launch (MIX_AIC 24/48): scores stay on chip."""
    bsh = HS
    flops = 4.0 * BATCH * HEADS * SEQ * SEQ * HEAD_DIM
    softmax_elems = BATCH * HEADS * SEQ * SEQ
    io = 4 * numel(bsh) * 2.0
    return [
        KernelSpec(
            name="aclnnFlashAttentionScore_FlashAttentionScore_FlashAttentionScore",
            op_type="FlashAttentionScore",
            core="MIX_AIC",
            block_dim=AIC_CORES,
            mix_block_dim=AIV_CORES,
            torch_op="npu::npu_fusion_attention",
            acl_api="aclnnFlashAttentionScore",
            in_shapes=f"{bsh};{bsh};{bsh};;;;{SEQ},{SEQ};;;;;",
            in_dtypes="DT_FLOAT16;DT_FLOAT16;DT_FLOAT16;DT_FLOAT16;UINT8;DT_FLOAT16;BOOL;INT64;INT64;INT64;INT64;INT64",
            in_formats=";".join(["ND"] * 12),
            out_shapes=f"{BATCH},{HEADS},{SEQ},8;{BATCH},{HEADS},{SEQ},8;;{bsh}",
            out_dtypes="FLOAT;FLOAT;DT_FLOAT16;DT_FLOAT16",
            out_formats="ND;ND;ND;ND",
            flops=flops,
            read_bytes=io * 0.75,
            write_bytes=io * 0.25,
            # softmax on fp32 scores: max, subtract, exp, sum, rescale, cast (6 passes)
            vector_bytes=softmax_elems * 4.0 * 6,
            context_id="0",
        )
    ]


def transformer_layer(fused: bool, o_proj_blocks: int = AIC_CORES) -> list[KernelSpec]:
    norm = rmsnorm_fused if fused else rmsnorm_unfused
    attn = attention_fused if fused else attention_unfused
    resid = vector_kernel("aclnnAdd", "Add", "aten::add", [(HS, F16), (HS, F16)], [(HS, F16)])
    ff = f"{BATCH},{SEQ},{FFN}"
    return [
        *norm(),
        matmul_kernel(TOKENS, HIDDEN, 3 * HIDDEN),
        *rope_unfused(),
        *attn(),
        matmul_kernel(TOKENS, HIDDEN, HIDDEN, block_dim=o_proj_blocks),
        resid,
        *norm(),
        matmul_kernel(TOKENS, HIDDEN, FFN),
        matmul_kernel(TOKENS, HIDDEN, FFN),
        vector_kernel("aclnnSilu", "Swish", "aten::silu", [(ff, F16)], [(ff, F16)], passes=4),
        vector_kernel("aclnnMul", "Mul", "aten::mul", [(ff, F16), (ff, F16)], [(ff, F16)]),
        matmul_kernel(TOKENS, FFN, HIDDEN),
        resid,
    ]


NONZERO = KernelSpec(
    name="aclnnNonzero_NonZeroAiCpu_NonZero",
    op_type="NonZero",
    core="AI_CPU",
    block_dim=1,
    mix_block_dim=0,
    torch_op="aten::nonzero",
    acl_api="aclnnNonzero",
    in_shapes=f"{BATCH},{SEQ}",
    in_dtypes="BOOL",
    in_formats="ND",
    out_shapes=f"{TOKENS},2",
    out_dtypes="INT64",
    out_formats="ND",
    sync_after=True,
)
ALLREDUCE = KernelSpec(
    name="hcom_allReduce__123_0_1",
    op_type="hcom_allReduce_",
    core="HCCL",
    block_dim=0,
    mix_block_dim=0,
    torch_op="c10d::allreduce_",
    acl_api="HcclAllReduce",
)


@dataclass(frozen=True)
class PlannedKernel:
    spec: KernelSpec
    step: int
    layer: int
    slot: int
    low_clock: bool = False


def training_plan(fused: bool) -> list[PlannedKernel]:
    """2 steps x 4 layers (forward), with the deliberate oddities the rules should find."""
    plan: list[PlannedKernel] = []
    for step in range(1, N_STEPS + 1):
        if step == 1:
            plan.append(PlannedKernel(NONZERO, step, -1, 0))
        for layer in range(N_LAYERS):
            # one output projection on 20 of 24 cube cores (wasted-cores rule)
            blocks = 20 if (step, layer) == (1, 1) else AIC_CORES
            for slot, spec in enumerate(transformer_layer(fused, blocks)):
                if (step, layer) == (2, 1) and not fused and slot in (3, 4):
                    # the eps Add and the Rsqrt of the first RMSNorm: two tiny kernels launched after a
                    # host-side sync + stall, so the device idles in front of them (host-bound gaps)
                    spec = replace(spec, host_gap_us=180.0 + 60.0 * (slot - 3))
                low = step == 1 and layer == 2 and spec.torch_op != "aten::matmul" and _is_rope(spec)
                plan.append(PlannedKernel(spec, step, layer, slot, low))
        if step == N_STEPS:
            plan.append(PlannedKernel(ALLREDUCE, step, -1, 0))
    return plan


def _is_rope(spec: KernelSpec) -> bool:
    return f",{2 * HEADS}," in spec.in_shapes


def schedule(plan: list[PlannedKernel], seed: int = SEED) -> tuple[list[Launch], list[dict[str, Any]]]:
    """Place host calls and device kernels on one timeline; returns launches and extra host events."""
    launches: list[Launch] = []
    extra: list[dict[str, Any]] = []  # syncs, profiler steps
    host = T0_NS
    stream_free = {COMPUTE_STREAM: T0_NS, HCCL_STREAM: T0_NS}
    task_ids = {COMPUTE_STREAM: 1200, HCCL_STREAM: 0}
    conn, seq = 100, 5000
    step_start: dict[int, int] = {}
    for i, pk in enumerate(plan):
        spec = pk.spec
        rng = random.Random(f"{seed}/{pk.step}/{pk.layer}/{pk.slot}/{spec.name}/{spec.block_dim}")
        if pk.step not in step_start:
            step_start[pk.step] = host
        if spec.host_gap_us:
            sync_end = max(host, stream_free[COMPUTE_STREAM])
            extra.append({"kind": "sync", "start": host, "end": sync_end})
            host = sync_end + int(spec.host_gap_us * 1000)
        op_dur = int((28 + rng.uniform(0, 18)) * 1000)
        _, _, node_start, node_dur = host_parts(host, op_dur)
        launch_ready = node_start + node_dur + 4000  # runtime -> device latency
        stream = HCCL_STREAM if spec.core == "HCCL" else COMPUTE_STREAM
        freq = DIP_FREQ_MHZ if pk.low_clock else FREQ_MHZ
        dur_us, pmu = model_kernel(spec, rng, freq)
        start = max(stream_free[stream] + int(rng.uniform(0.6, 1.6) * 1000), launch_ready)
        if spec.core == "HCCL":  # gradients are ready only when the compute stream is done
            start = max(start, stream_free[COMPUTE_STREAM] + 10_000)
        first_on_stream = all(la.stream != stream for la in launches)
        dur = round(dur_us * 1000)
        conn += 2
        seq += 1
        launches.append(
            Launch(
                spec=spec,
                step=pk.step,
                start_ns=start,
                dur_ns=dur,
                wait_ns=0 if first_on_stream else start - stream_free[stream],
                stream=stream,
                task_id=task_ids[stream],
                conn_id=conn,
                seq=seq,
                freq_mhz=freq,
                host_start_ns=host,
                host_dur_ns=op_dur,
                pmu=pmu,
            )
        )
        task_ids[stream] += 1
        stream_free[stream] = start + dur
        host += op_dur + int(rng.uniform(2, 6) * 1000)
        if spec.sync_after:
            extra.append({"kind": "sync", "start": host, "end": start + dur})
            host = max(host, start + dur) + 20_000
        if i + 1 == len(plan) or plan[i + 1].step != pk.step:
            end = max(stream_free.values())
            extra.append({"kind": "sync", "start": host, "end": end})
            host = max(host, end) + 50_000
            extra.append(
                {"kind": "step", "step": pk.step, "start": step_start[pk.step], "end": host - 20_000}
            )
    return launches, extra


def host_parts(host_start: int, op_dur: int) -> tuple[int, int, int, int]:
    """AscendCL@ call inside the torch op, and Node@launch inside the AscendCL@ call (all ns)."""
    acl_start, acl_dur = host_start + 4000, op_dur - 8000
    node_start = acl_start + acl_dur * 6 // 10
    return acl_start, acl_dur, node_start, 2500
