"""Counter-based pseudo-random numbers (threefry-2x32) with explicit keys."""
