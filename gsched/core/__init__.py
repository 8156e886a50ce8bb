"""Stage 1 — graphs: the host-side graph model (:mod:`.graph`), its padding into fixed-size
device arrays (:mod:`.padding`), exact fixed-point arithmetic (:mod:`.fixedpoint`) and the
batch-merging vmap of the cost model's batched hot paths (:mod:`.batching`)."""
