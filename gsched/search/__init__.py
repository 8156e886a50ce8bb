"""Stage 3 — budgeted searches over chromosomes: what they share (:mod:`.common`), BRKGA
(:mod:`.brkga`), random search (:mod:`.random`), local search (:mod:`.local`) and the tuned
BRKGA settings (:mod:`.tuned`)."""
