"""The sample-trace generator behind ``sample_traces/generate.py`` (GENERATED data, not measurements).

Modules, in dependency order:

* ``model``        constants (chip, identities, workload, assumptions) and the 910B2 cost model
* ``layer``        the transformer-layer kernel list, the 2-step plan and its host/device schedule
* ``kernel_table`` torch_npu ``kernel_details.csv`` (vectorised rows)
* ``trace_view``   torch_npu ``trace_view.json`` events
* ``output``       file writing, ``manifest.json`` and ``README.md`` of a sample
* ``torch_npu``    the ``attention_unfused`` / ``attention_fused`` ``*_ascend_pt`` directories
* ``msprof_op``    ``msprof op`` per-block CSVs of a TileLang flash-attention kernel
* ``samples``      the msprof op samples and ``generate_samples`` (all bundled samples)
* ``large``        benchmark inputs (N-row kernel table, BYTES of trace), only on request
* ``cli``          the command line

``sample_traces`` is not an installed package: ``generate.py`` puts its own directory on
``sys.path`` and imports this package as ``generator``; the modules import each other relatively,
so ``python -m sample_traces.generator`` from the repository root works too.
"""
