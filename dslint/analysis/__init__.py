"""Static analyses shared by rule families."""
