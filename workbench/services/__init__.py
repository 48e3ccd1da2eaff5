"""Local services the workbench starts and stops itself (``workbench services up opensearch``)."""
