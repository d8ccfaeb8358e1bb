"""The product's colours (docs/product.md), one palette for the HTML report and the dashboard:
units and pipes, severities, core types, and the order the pipe and unit series are drawn in.
No plotting library is imported here, so text, Markdown and SARIF never load one."""

from __future__ import annotations

from tilescope.columns import CUBE_TYPES, VECTOR_TYPES

CUBE = "#1f77b4"
VECTOR = "#ff7f0e"
# MIX kernels run on both sides: the light member of their side's pair, so a Cube kernel and a
# MIX_AIC one read apart on the timeline while staying in their side's family
MIX_CUBE, MIX_VECTOR = "#aec7e8", "#ffbb78"
COMMUNICATION = "#17becf"  # HCCL collectives: cyan, away from every unit and severity colour
AI_CPU = "#e377c2"  # AI_CPU kernels: pink
MTE1, MTE2, MTE3 = "#98df8a", "#2ca02c", "#1a6e1a"  # the #2ca02c family, light to dark
SCALAR = "#9467bd"
# The Vector core's own MTE and Scalar pipes: the same families (greens, purple), other hues, so a
# chart of both sides never draws MTE2 (AIC) and MTE2 (AIV) in one colour (#28 item 11). The
# greens lean yellow (olive) on the Vector side, as the Vector orange does against the Cube blue.
AIV_MTE2, AIV_MTE3 = "#8ca252", "#637939"
AIV_SCALAR = "#c5b0d5"
FIXPIPE = "#8c564b"
IDLE = "#c7c7c7"
HOST = "#9aa5b1"  # host threads are not a core type: slate, apart from idle/other grey
LAUNCH = "#7f7f7f"  # host → kernel launch arrows on the timeline: neutral, darker than idle/other
SEVERITY_COLOURS = {"high": "#c0392b", "medium": "#e67e22", "low": "#f1c40f", "info": "#7f8c8d"}
# the side a core type runs on; "AIC" / "AIV" are the block tables' core names
CORE_COLOURS = {**dict.fromkeys(CUBE_TYPES, CUBE), "AIC": CUBE,
                **dict.fromkeys(VECTOR_TYPES, VECTOR), "AIV": VECTOR}

# (column, label, colour) for the per-kernel pipe bars: Cube-side pipes then Vector-side pipes, each
# as its share of the launch (tilescope.metrics: the same meaning whatever the profiler); every
# series its own colour. The dashboard's pipe chart and the HTML report's both draw these.
PIPE_SERIES: tuple[tuple[str, str, str], ...] = (
    ("aic_cube_share", "Cube", CUBE),
    ("aic_mte1_share", "MTE1 (AIC)", MTE1),
    ("aic_mte2_share", "MTE2 (AIC)", MTE2),
    ("aic_mte3_share", "MTE3 (AIC)", MTE3),
    ("aic_fixpipe_share", "FixPipe", FIXPIPE),
    ("aic_scalar_share", "Scalar (AIC)", SCALAR),
    ("aiv_vec_share", "Vector", VECTOR),
    ("aiv_mte2_share", "MTE2 (AIV)", AIV_MTE2),
    ("aiv_mte3_share", "MTE3 (AIV)", AIV_MTE3),
    ("aiv_scalar_share", "Scalar (AIV)", AIV_SCALAR),
)
SHARE_SERIES: tuple[tuple[str, str, str], ...] = (
    ("cube", "Cube", CUBE), ("vector", "Vector", VECTOR), ("mte", "Data movement (MTE)", MTE2),
    ("scalar", "Scalar", SCALAR),
)

# The severities on a terminal, per colour system rich picks from TERM / COLORTERM. The hex colours
# downgraded by rich read wrong: on 16 colours high came out yellow and medium red, on 256 both the
# same orange. So each system gets its own: on 16, red / yellow (the palette's darker, orange-ish
# one) / bright yellow / grey; on 256, the cube's red 160, orange 208, gold 220 and grey 245; with
# 24-bit colour the product's own.
TERMINAL_SEVERITY = {
    # no bold but on high: many terminals draw bold yellow as the bright one, low's
    "standard": {"high": "bold red", "medium": "yellow", "low": "bright_yellow", "info": "bright_black"},
    "256": {"high": "bold color(160)", "medium": "bold color(208)", "low": "color(220)",
            "info": "color(245)"},
    "truecolor": {"high": f"bold {SEVERITY_COLOURS['high']}", "medium": f"bold {SEVERITY_COLOURS['medium']}",
                  "low": SEVERITY_COLOURS["low"], "info": SEVERITY_COLOURS["info"]},
}


def severity_style(severity: str, color_system: str | None) -> str:
    """The rich style of a severity on a console of `color_system` (`Console.color_system`:
    "standard", "256", "truecolor", "windows", or None without colour)."""
    system = color_system if color_system in TERMINAL_SEVERITY else "standard"
    return TERMINAL_SEVERITY[system].get(severity, "")
