"""Stage 4 — learned policies, one package each: REGAL (:mod:`.regal`), Neural Topological
Ordering (:mod:`.topoformer`), GDP and GO (:mod:`.go`) and HDP (:mod:`.hdp`, trained on each
graph inside its budget). Each exports its registry entries (``METHODS``) from ``method``."""
