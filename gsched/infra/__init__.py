"""Infrastructure shared by training and evaluation: typed TOML configs (:mod:`.config`),
progress lines and JSON-lines logs (:mod:`.progress`), orbax checkpoints (:mod:`.checkpoint`,
the only module that imports orbax), device meshes (:mod:`.distributed`) and the training loop
(:mod:`.train_loop`)."""
