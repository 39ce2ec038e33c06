"""Transform: pure polars functions from staging frames to the star schema."""
