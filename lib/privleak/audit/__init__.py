"""Auditing decoding-time DP from the outside: neighbouring inputs with a canary, the exact
privacy loss of candidate outputs (white-box), a distinguishing test on sampled outputs
(black-box), and the statistics that turn either into a lower bound on epsilon.

- `canaries`: canary documents with a unique secret, and the neighbouring pairs (D, D');
- `forced`: forced decoding of many candidate outputs after forked prompts, in one batch;
- `pairs`: each mechanism's per-token log-probabilities of candidates under D and under D'
  (DP-ICL, bounded CID, PAD), with their deliberately broken controls;
- `bounds`: Clopper-Pearson intervals, the white-box and black-box epsilon lower bounds, the
  hockey-stick divergence at the nominal epsilon;
- `accountants`: PAD's Gaussian steps composed into one Gaussian, under RDP, PLD and PRV;
- `run`: one mechanism's candidates over its canaries, as tidy rows;
- `table`: one row per (mechanism, variant): nominal vs audited epsilon and the flag;
- `figure`: one figure per mechanism from the table.
"""
