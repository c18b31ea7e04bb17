"""Previews of what users stored, bounded by what they show rather than by what they were given.

- `values`: how a previewed value travels to a page (JSON-able, and cut to a size);
- `tables`: Parquet and ORC read in ROW_LIMIT-row batches, run in a child process under a memory
  and CPU limit (`table_child` starts it): a file of a few hundred bytes can declare a cell that
  decodes to gigabytes, and the decoder (pyarrow, liborc) cannot be told to stop at a size.

This package imports nothing heavy at module level: the child loads it before setting its limits.
The console (`kinesim.webconsole.object_preview`) is its user.
"""
