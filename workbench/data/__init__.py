"""Datasets: the catalog of datasets.toml, the source loaders, the query-set builders."""
