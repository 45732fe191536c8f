"""Lexical cue statistics (ICQ): linguistic features, NLTK resources, statistics, model probing."""
