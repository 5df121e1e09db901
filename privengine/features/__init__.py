"""Data-independent features that cost no privacy (the 2-D scattering transform), shared by the mechanisms."""
