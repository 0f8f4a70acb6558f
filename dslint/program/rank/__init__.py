"""Which ranks may run each line and what each value is, across ranks: the rank-uniformity lattice (lattice), what
an expression is on each rank (value_uniformity) and across functions (function_summaries), the walk that tracks
the rank-dependent control around every call (reaching_ranks), the values a uniform setting can take
(setting_domains), objects of known libraries (library_types), and the hazards they make: collective sites that
control reaches on some ranks only (collective_hazards), the collectives each path calls (collective_sequences) and
ranks that may raise before a collective (raising_ranks)."""
