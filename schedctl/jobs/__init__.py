"""What a job is and how it is defined: the ``Job`` value with its policies and states, and the TOML job
files that define it."""
