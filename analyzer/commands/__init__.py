"""The sub-commands of `tilescope`, one module each (analyzer/cli.py registers them)."""

CHIP_HELP = "Chip name (910B2, ...) or a .toml/.json chip file."
