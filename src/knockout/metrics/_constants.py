"""Defaults the command line shows without loading numpy (``knockout --help`` stays fast)."""

#: bootstrap resamples for the 95% confidence intervals
DEFAULT_RESAMPLES = 1000
