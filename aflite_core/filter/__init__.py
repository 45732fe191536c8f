"""Filtering: the AFLite estimator, its linear kernels, backends and synthetic workloads."""
