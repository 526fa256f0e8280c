# Bug: the vocabulary keeps only words seen at least 100 times (a min_freq meant for a large corpus):
# nearly every token of this corpus maps to <unk>.
vocab = build_vocab(_texts[:1000], min_freq=100)
train, dev, extern_data = datasets()
