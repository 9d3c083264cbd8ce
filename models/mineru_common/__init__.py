"""Pieces shared by the two real-model backends (MinerU-Diffusion and MinerU2.5), so both read the
same checkpoint files, build the same prompts and see the same pixels: a fair comparison."""
