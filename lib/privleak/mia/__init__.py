"""Membership inference against known ground truth (docs/design.md §11).

- `texts`: the scored texts and their membership (planted and held-out sequences, or files);
- `scoring`: one teacher-forced pass per model, the per-token statistics every attack reads;
- `attacks`: LOSS, zlib, Min-K%, Min-K%++, the reference ratio and offline LiRA;
- `table`: every attack's score of every text and model, and the metric table;
- `metrics`: ROC AUC and TPR at low FPR, with a bootstrap crossing texts and training runs;
- `figure`: ROC curves on log axes, and S1's ESP against a membership score.
"""
