"""Text: normalisation and folding, the reference grammar, passages, the text of a document."""
