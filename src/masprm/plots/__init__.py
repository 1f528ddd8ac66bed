"""Pictures of the pipeline's outputs (matplotlib is imported only when drawing)."""
