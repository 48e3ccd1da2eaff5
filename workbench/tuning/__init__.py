"""Tuning: the study file and its search space, studies with Optuna, choice, export.

``space`` (the study file, the search space) → ``candidates`` (lane candidates per engine setting)
→ ``objective`` (a trial's fusion setting and its score) → ``storage`` (where a study lives; journal
repair and locks), ``recovery`` (trials left by a dead process, the baseline re-enqueued) →
``report`` (:class:`~workbench.tuning.report.StudyResult`, ``report.json``) → ``select`` (choice,
sensitivity, the honest dev/test report) → ``study`` (running a study and its workers: what
``workbench tune`` calls) → ``export`` (the production config) → ``outputs`` (the output folder,
figures, the summary).
"""
