"""One file per schema revision, numbered in order: 0001, 0002, ..."""
