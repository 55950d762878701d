"""Toolset selection: which toolsets a turn is offered (`selector`), from the message, its attachments,
the session's recent use and the user's pins, with the keyword scanner (`keywords`) and the meaning
layer (`meaning`: BM25 over `examples`, words made terms by `terms`) and the vector layer (`vectors`:
a classifier over static word embeddings, its table `vectors.bin`). A bottom layer: imports nothing
of the gateway.
"""
