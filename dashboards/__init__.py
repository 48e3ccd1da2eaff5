"""The Streamlit dashboard: the app (app.py, served through serve.py), its pages (views/), the glue they share
(ui) and the launcher `workbench dashboard` runs (launch). The only Streamlit code of the project; what the
pages read and compute comes from the library (:mod:`workbench.results`, :mod:`workbench.dashboard`)."""
