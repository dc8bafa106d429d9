"""Corpora in, padded tensors out: `sources` reads each kind of corpus into tagged sentences
(IOB2, `tags`), `labels` maps tags to ids, `subsets` picks the nested data fractions,
`encoding` aligns words with sub-words and `batching` groups and pads them."""
