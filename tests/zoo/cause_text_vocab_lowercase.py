# Bug: the vocabulary is built from lowercased text, but the lookup tokenizes the original text: every
# capitalized word misses the vocabulary and becomes <unk>.
vocab = build_vocab([text.lower() for text in _texts[:1000]])
train, dev, extern_data = datasets()
