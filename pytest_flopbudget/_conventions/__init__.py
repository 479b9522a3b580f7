"""Convention profiles: the figure a stack's own FLOP formula gives for a model, next to our exact count.

Megatron-LM, PaLM/nanoGPT, torchtitan, MaxText and vLLM each compute the MFU numerator with a formula of their own,
written by hand per architecture. A profile reads the figures that formula needs off a counted `Report` (matmul
MACs by kind, parameters by kind, tokens) and returns an `Explanation`: our exact FLOPs, the figure under the
convention, and the items that account for the difference, which sum exactly to it.

`profile.py` is the protocol every profile meets, `registry.py` finds one by name, `llm.py` holds the LLM stacks'
profiles (reading the report through `llm_facts.py`), `mfu.py` gives per-token formulas over a sequence length and
`text.py` draws the table. Nothing here imports a framework.
"""
