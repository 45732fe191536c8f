"""Run folders: the on-disk format, reading and listing runs, exports."""
