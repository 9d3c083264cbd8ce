"""The embedded nano OCR pair (subword twins): diffusion and AR, trained by us, shipped in assets/models."""
