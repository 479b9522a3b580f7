"""Reference architectures that pytest-flopbudget's own tests measure."""
