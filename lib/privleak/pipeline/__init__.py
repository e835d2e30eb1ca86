"""Pipeline machinery: paths, params and their schema, the stage runner, checkpoints, the
preflight and `make verify`. Nothing here computes a paper's quantity."""
