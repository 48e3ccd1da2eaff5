"""Loaders: one module per source under the data directory, each yielding :class:`~workbench.types.Document`.

* :mod:`workbench.data.loaders.bilara`: SuttaCentral bilara-data (DN, MN, SN 56, Dhp), segments.
* :mod:`workbench.data.loaders.cst4`: CST4 / CSCD XML (UTF-16), MN mūla and aṭṭhakathā paragraphs.
* :mod:`workbench.data.loaders.gita`: the Bhagavad-gītā, 701 verses.
* :mod:`workbench.data.loaders.dpd`: the Digital Pāḷi Dictionary's form → lemma lexicon.
* :mod:`workbench.data.loaders.bhagavatam`: the Bhāgavatam sample (test data only; no licence stated).
"""
