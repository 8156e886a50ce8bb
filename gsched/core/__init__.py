"""Stage 1 — graphs: the host-side graph model (:mod:`.graph`), its padding into fixed-size
device arrays (:mod:`.padding`) and exact fixed-point arithmetic (:mod:`.fixedpoint`)."""
