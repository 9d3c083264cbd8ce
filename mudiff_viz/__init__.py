"""mudiff-viz: look inside diffusion decoding of document OCR."""

__version__ = "0.1.0"
