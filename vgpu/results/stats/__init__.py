"""Statistics of repeats (pure, standard library only): confidence intervals and
quantiles, noise levels between repeats and between series, alpha spending of sequential
looks, pooled tail latencies. Imports nothing else of vgpu."""
