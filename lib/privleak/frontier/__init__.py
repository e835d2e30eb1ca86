"""One leakage-utility frontier across every decoding-time defense (docs/design.md §12): the
defenses as sweep points on one task and one decoder (`points`, `run`), the planted secrets a
prompt exposes (`secrets`), matched-utility leakage, the Pareto set and paired intervals
(`matched`), and the figure (`figure`)."""
