"""Stage 2 — the cost model (SPEC §2–§4): settings (:mod:`.params`), chromosome decoding and
the list schedule (:mod:`.schedule`), peak memory (:mod:`.memory`), the jitted and batched
entry points (:mod:`.evaluate`) and their host-side wrappers (:mod:`.host`)."""
