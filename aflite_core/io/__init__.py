"""Loading: readers for every supported format, the dataset model, table writers."""
