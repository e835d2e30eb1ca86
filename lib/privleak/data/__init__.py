"""Corpora: synthetic generators with planted-secret ground truth, and loaders for real corpora.

Each module does one job, so a stage depends only on what it imports (nothing is re-exported
here):
    templating   what the generators share: templates whose secret slots become spans, filler
                 prose, seeded randomness, secret rows
    cnn_dm, pubmedqa, pretrain, medical, rag_private, dialogs
                 synthetic generators, each with its own templates and word pools in
                 templates/<name>.yaml (package data)
    synthetic    GENERATORS by name and generate, the `synthetic:<name>` dispatch
    records      JSON-lines records: read_jsonl, write_jsonl, read_sequences, take
    loaders      synthetic:, hf: and file: sources into data/raw/ (load_corpus, materialize_all)
    chunking     documents cut into retrieval chunks at word boundaries
"""
