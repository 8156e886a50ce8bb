"""Infrastructure shared by training and evaluation: typed TOML configs (:mod:`.config`),
progress lines and JSON-lines logs (:mod:`.progress`), orbax checkpoints (:mod:`.checkpoint`,
the only module that imports orbax), device meshes (:mod:`.distributed`), the training loop
(:mod:`.train_loop`) and the memory mappings compiled executables hold (:mod:`.resources`)."""
