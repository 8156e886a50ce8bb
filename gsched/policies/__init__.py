"""Stage 4 — learned policies, one package each: REGAL (:mod:`.regal`) and Neural Topological
Ordering (:mod:`.topoformer`). Each exports its registry entries (``METHODS``) from ``method``."""
