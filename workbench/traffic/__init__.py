"""Real users' traffic: UBI logs written by ``workbench serve`` and read by ``workbench logs import`` (issue #43).

* :mod:`workbench.traffic.ubi`: the User Behavior Insights records (query and event), built and parsed;
* :mod:`workbench.traffic.writer`: JSON lines appended whole, rotated at a size, bounded on disk;
* :mod:`workbench.traffic.log`: what a served port records (hashed clients, sessions, follow-ups);
* :mod:`workbench.traffic.importer`: UBI JSON lines (the workbench's own, or exported from OpenSearch's
  ``ubi_queries`` / ``ubi_events`` indexes) read into a log set, with a counted list of what was skipped;
* :mod:`workbench.traffic.clicks`: implicit relevance from clicks (COEC, the position-based and cascade models);
* :mod:`workbench.traffic.interleave`: team-draft and balanced interleaving, their credit, the sign test;
* :mod:`workbench.traffic.sample`: query sets drawn from traffic (normalised, deduplicated, typed, split);
* :mod:`workbench.traffic.implicit`: a dataset's ``implicit`` qrels layer from a log set (``logs judge``), and its
  agreement with the scholars.
"""
